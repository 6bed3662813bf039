"""tasks/loops: the second suite of serial kernels written in other people's styles (issue 17, item 4).

Static checks on every task (it loads, is an OpenMP task with a serial baseline, declares its work,
says whether its outer loop is parallel as written, keeps its timing size's compulsory traffic under
512 MiB), the suite's coverage of the styles it promises, and `task check` on the two quickest tasks.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernopt.task import load_task
from tests.conftest import REPO, needs

SUITE = REPO / "tasks" / "loops"
TASKS = sorted(p.parent for p in SUITE.glob("*/task.toml"))
IDS = [p.name for p in TASKS]


def _kernel(path: Path) -> str:
    return (path / load_task(path).kernel).read_text()


def test_suite_size_and_acceptance_kernel() -> None:
    names = {p.name for p in TASKS}
    assert len(names) >= 22, names
    assert "gemm_ab" in names
    src = _kernel(SUITE / "gemm_ab")
    # the acceptance kernel: beta scaling first, then alpha-accumulation into C[i][j], i-j-k order
    scale, acc = src.index("C[i][j] *= beta;"), src.index("C[i][j] += alpha * A[i][k] * B[k][j];")
    assert scale < acc
    assert src.index("for (long i") < src.index("for (long j") < src.index("for (long k")


@pytest.mark.parametrize("path", TASKS, ids=IDS)
def test_task_is_well_formed(path: Path) -> None:
    task = load_task(path)
    assert task.name == path.name and task.target == "openmp"
    src = _kernel(path)
    assert "#pragma" not in src and "omp_" not in src, "the baseline is serial"
    assert task.roofline is not None, "every task declares its work"
    flops, nbytes = task.roofline.work(task.sizes.timing)
    assert flops >= 0 and 0 < nbytes < 512 * 2**20, (flops, nbytes)
    assert len(task.sizes.check) >= 4 and 1 in task.sizes.check
    desc = task.description
    assert re.search(r"\b(not )?parallel(izable)? (as written|over)", desc, re.I), "the description says what is parallel as written"
    assert "written by `kernopt task new`" not in desc, "the generated placeholder description was replaced"
    # task new's buffer line marks the work arrays the baseline overwrites; they must be declared, or the
    # monitor rejects the baseline's own kernel as modifying an input (task check does not notice)
    for buf in re.findall(r"(\S+) \(scratch,", desc):
        assert buf in task.verify.scratch, buf


def test_the_styles_are_each_used_at_least_three_times() -> None:
    sources = {p.name: _kernel(p) for p in TASKS}
    styles = {
        "array-element accumulation": re.compile(r"\w+\[[^\]]+\](\[[^\]]+\])*\s*[+-]=\s*[^;]*\*"),
        "VLA pointer types": re.compile(r"\(\*\s*(restrict\s+)?\w*\)\s*\[\w+\]"),
        "IDX-style macros": re.compile(r"#define\s+(IDX|I3|AT|PX)\("),
        "alpha/beta scalars": re.compile(r"\b(alpha|beta)\b"),
        "triangular bounds": re.compile(r"for \(long \w+ = [^;]+; \w+ <=? [ijk];"),
        "time loop": re.compile(r"#define (STEPS|SWEEPS)\b"),
        "struct of arrays": re.compile(r"struct \w+ \{"),
        "float": re.compile(r"\bfloat\b"),
        "8-bit data": re.compile(r"unsigned char"),
    }
    for style, pattern in styles.items():
        users = [name for name, src in sources.items() if pattern.search(src)]
        assert len(users) >= 3, (style, users)


def test_readme_lists_every_task() -> None:
    readme = (SUITE / "README.md").read_text()
    for p in TASKS:
        assert f"`{p.name}`" in readme, p.name


@needs("gcc")
@pytest.mark.parametrize("name", ["cholesky_right", "gemm_ab"])
def test_task_check_passes(name: str) -> None:
    from kernopt.sandbox import get_sandbox
    from kernopt.task_check import check_task

    task = load_task(SUITE / name)
    checks = check_task(task, get_sandbox("local", task.target))
    failed = [f"{c.name}: {c.detail}" for c in checks if not c.ok and not c.warning]  # timing outside the band on a busy machine only warns
    assert not failed, failed
