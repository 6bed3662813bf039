"""tasks/derived: the third suite of serial loop kernels, sizes derived from n by ratios (issue 27, item 6).

Static checks on every task (it loads, is an OpenMP task with a serial baseline, declares its work, says
what is parallel as written, derives its extents from n inside the kernel and indexes flat arrays with
them, keeps its timing size's compulsory traffic under 512 MiB, declares the buffers it overwrites as
scratch), the styles the suite promises, `task check` on two tasks, and the claim one description
makes: the contraction's outer loops are parallel only with a private scratch vector.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernopt.task import load_task
from tests.conftest import REPO, enterable_tmpdir, needs

SUITE = REPO / "tasks" / "derived"
TASKS = sorted(p.parent for p in SUITE.glob("*/task.toml"))
IDS = [p.name for p in TASKS]
# an extent derived from n by a ratio: `nj = (9 * n + 7) / 8`, `ld = n + n / 4 + 1`
RATIO = re.compile(r"\b\w+ = (\(\d+ \* n( [+-] \d+)?\) / \d+|n \+ n / \d+)( [+-] \d+)?[,;]")


def _kernel(path: Path) -> str:
    return (path / load_task(path).kernel).read_text()


def test_suite_size() -> None:
    assert 8 <= len(TASKS) <= 10, IDS


@pytest.mark.parametrize("path", TASKS, ids=IDS)
def test_task_is_well_formed(path: Path) -> None:
    task = load_task(path)
    assert task.name == path.name and task.target == "openmp" and task.timing.threads == 2
    src = _kernel(path)
    assert "#pragma" not in src and "omp_" not in src, "the baseline is serial"
    assert RATIO.search(src), "an extent derived from n by a ratio"
    assert re.search(r"\b\w+ \* (n\w*|ld) \+ \w+", src), "flat indexing with a derived stride (i * nk + k)"
    assert "(*" not in src and "#define" not in src, "flat arrays only (no VLA casts, no IDX macros)"
    assert task.roofline is not None, "every task declares its work"
    flops, nbytes = task.roofline.work(task.sizes.timing)
    assert flops > 0 and 0 < nbytes < 512 * 2**20, (flops, nbytes)
    assert len(task.sizes.check) >= 4 and 1 in task.sizes.check
    desc = task.description
    assert re.search(r"\b(not )?parallel(izable)? (as written|over)", desc, re.I), "the description says what is parallel as written"
    assert "written by `kernopt task new`" not in desc, "the generated placeholder description was replaced"
    for buf in re.findall(r"(\S+) \(scratch,", desc):  # the monitor rejects an undeclared overwritten input
        assert buf in task.verify.scratch, buf


def test_the_styles_the_suite_promises() -> None:
    sources = {p.name: _kernel(p) for p in TASKS}

    def products(src: str) -> int:  # nests that zero or scale an element and then accumulate a product into it
        return len(re.findall(r"(\w+)\[[^\]]+\] (= 0\.0|\*= beta);\s*for \(long \w+ = 0; [^)]*\)\s*\1\[[^\]]+\] \+= [^;]*\*", src))

    chains = sorted(products(s) for s in sources.values() if products(s) >= 2)
    assert chains[:2] == [2, 3], "a chain of two products and one of three"
    styles = {
        "sweep loop inside the kernel": re.compile(r"for \(long t = 0; t < nsweeps; t\+\+\)"),
        "in-place factorization": re.compile(r"a\[\w+ \* ld \+ \w+\] (/|-)= "),
        "scratch vector written, then read, per outer iteration": re.compile(r"sum\[p\] = [^;]+;[^}]*sum\[p\] \+="),
        "triangular bounds": re.compile(r"for \(long \w+ = (\w+ \+ 1|0); \w+ < [ijk]\b"),
    }
    for style, pattern in styles.items():
        users = [name for name, src in sources.items() if pattern.search(src)]
        assert users, style
    assert len([n for n, s in sources.items() if styles["sweep loop inside the kernel"].search(s)]) >= 2
    assert len([n for n, s in sources.items() if styles["in-place factorization"].search(s)]) >= 2


def test_readme_lists_every_task() -> None:
    readme = (SUITE / "README.md").read_text()
    for p in TASKS:
        assert f"`{p.name}`" in readme, p.name


@needs("gcc")
@pytest.mark.parametrize("name", ["contract_inplace", "lu_padded"])
def test_task_check_passes(name: str) -> None:
    from kernopt.sandbox import get_sandbox
    from kernopt.task_check import check_task

    task = load_task(SUITE / name)
    checks = check_task(task, get_sandbox("local", task.target))
    failed = [f"{c.name}: {c.detail}" for c in checks if not c.ok and not c.warning]  # timing outside the band on a busy machine only warns
    assert not failed, failed


@pytest.fixture
def contraction() -> Iterator[object]:
    from kernopt.config import EvalConfig
    from kernopt.evaluators.c_family.evaluator import CFamilyEvaluator
    from kernopt.sandbox import get_sandbox

    with enterable_tmpdir("kernopt-test-derived-") as d:
        ev = CFamilyEvaluator(load_task(SUITE / "contract_inplace"), get_sandbox("local"), EvalConfig(), d / "ev")
        yield ev
        ev.close()


@needs("gcc", "clang")
@pytest.mark.usefixtures("private_host_lock")
def test_the_contraction_is_parallel_only_with_a_private_scratch_vector(contraction: object) -> None:
    from kernopt.candidate import Candidate
    from kernopt.evaluators.c_family.evaluator import CFamilyEvaluator

    assert isinstance(contraction, CFamilyEvaluator)
    task = contraction.task
    src = task.baseline_source()
    outer = "    for (long r = 0; r < nr; r++)\n        for (long q = 0; q < nq; q++) {"
    assert outer in src
    shared = src.replace(outer, "#pragma omp parallel for collapse(2)\n" + outer)
    private = src.replace(outer, "#pragma omp parallel for collapse(2)\n" + outer.replace("{", "{\n            double sum[np];", 1))
    ok, _ = contraction.check_untimed(Candidate(files={task.kernel: private}))
    assert ok.status == "ok", ok.reason
    bad, _ = contraction.check_untimed(Candidate(files={task.kernel: shared}))
    assert bad.status != "ok", "a parallel loop over a shared scratch vector is a race"
