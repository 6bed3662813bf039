"""The race check, with the real clang ThreadSanitizer: it fails closed, sees the program gcc builds,
and its verdicts on a sample of the race suite (tests/race_suite; the whole suite: bench/race_suite.py).

The dodges (tests/hacks/h17c-h17f) never end `ok`: a branch only clang takes, an #error only clang
sees, a parallel region opened by calling GOMP_parallel with no `omp` in the text, and a kernel
clang cannot compile. A race check that cannot run (no clang, no sanitizer runtime) rejects the
candidate unless the user turned the check off, and then every verdict and summary says `off`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console

from kernopt.bench.summary import suite_figures
from kernopt.candidate import Candidate
from kernopt.config import EvalConfig, RunConfig
from kernopt.evaluators.c_family import race
from kernopt.evaluators.c_family.evaluator import CFamilyEvaluator
from kernopt.evaluators.c_family.static_gate import check_text
from kernopt.evaluators.result import EvalResult, Verification
from kernopt.optimize import make_summary
from kernopt.sandbox import get_sandbox
from kernopt.task import Task, load_task
from kernopt.ui import ProgressHooks, print_bench_summary, print_summary
from tests.conftest import REPO, enterable_tmpdir

TESTS = Path(__file__).resolve().parent
HACKS = TESTS / "hacks"
SMALL = TESTS / "data" / "small_gemm"
SUITE = TESTS / "race_suite"

needs_clang = pytest.mark.skipif(shutil.which("clang") is None or shutil.which("gcc") is None, reason="needs gcc and clang")
EvFactory = Callable[..., CFamilyEvaluator]


@pytest.fixture(scope="module")
def workroot() -> Iterator[Path]:
    with enterable_tmpdir("kernopt-race-") as d:
        yield d


@pytest.fixture(scope="module")
def make_ev(workroot: Path) -> Iterator[EvFactory]:
    """Evaluators by (task, config), kept for the module so each builds its baseline once."""
    cache: dict[str, CFamilyEvaluator] = {}

    def make(task: Task | Path, **config: object) -> CFamilyEvaluator:
        t = task if isinstance(task, Task) else load_task(task)
        key = f"{t.name}-{t.verify.model_dump_json()}-{sorted(config.items())}"
        if key not in cache:
            cfg = EvalConfig(**{"rounds": 2, **config})  # type: ignore[arg-type]
            cache[key] = CFamilyEvaluator(t, get_sandbox("local"), cfg, workroot / f"ev{len(cache)}")
        return cache[key]

    yield make
    for ev in cache.values():
        ev.close()


def evaluate(ev: CFamilyEvaluator, source: str) -> EvalResult:
    return ev.evaluate(Candidate(files={ev.task.kernel: source}))


def show(r: EvalResult) -> str:
    return f"{r.status}: {r.reason}\n{r.verification.race_check}: {r.verification.race_detail[:1500]}\n{r.log[-1500:]}"


# ---------------------------------------------------------------- the dodges
@needs_clang
@pytest.mark.parametrize("name", ["h17c_race_unless_clang.c", "h17d_error_under_clang.c", "h17e_direct_gomp_parallel.c"])
def test_dodge_is_race_checked_and_rejected(make_ev: EvFactory, name: str) -> None:
    """Right at every thread count (the sweep passes), racy as gcc builds it: the race check, which
    reads and compiles what gcc preprocessed and follows the object's GOMP calls, finds the race (the
    static check in the source gcc sees, or the sanitizer where the text calls GOMP_parallel itself)."""
    r = evaluate(make_ev(SMALL), (HACKS / name).read_text())
    assert r.status == "rejected", show(r)
    by = "ThreadSanitizer reported" if name.startswith("h17e") else "the static race check found a data race: kernel.c:"
    assert r.reason.startswith(f"data race: {by}"), show(r)
    assert r.verification.race_check == "race" and r.verification.threads == [1, 2, 3, 4]


@needs_clang
def test_kernel_clang_cannot_build_is_rejected(make_ev: EvFactory) -> None:
    """A nested function (gcc only): verified correct, but the sanitizer build fails, so not ok."""
    r = evaluate(make_ev(SMALL), (HACKS / "h17f_gcc_only_nested_function.c").read_text())
    assert r.status == "rejected", show(r)
    assert r.reason.startswith("race check unavailable: clang cannot build the kernel for the sanitizer"), r.reason
    assert r.reason.endswith("or opt out with --no-race-check") and "\n" not in r.reason
    assert r.verification.race_check == "unavailable"


# ---------------------------------------------------------------- fail closed
@pytest.fixture(scope="module")
def clang_without_tsan_runtime(workroot: Path) -> Path:
    """A clang whose resource directory has its headers but not its runtime libraries: what a machine
    without libclang-rt-14-dev has (every ThreadSanitizer link fails)."""
    real = subprocess.run(["clang", "-print-resource-dir"], capture_output=True, text=True, check=True).stdout.strip()
    res = workroot / "resource"
    res.mkdir()
    (res / "include").symlink_to(Path(real) / "include")
    wrapper = workroot / "clang-no-tsan"
    wrapper.write_text(f'#!/bin/sh\nexec clang -resource-dir={res} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


@needs_clang
def test_missing_sanitizer_runtime_rejects_and_names_the_package(make_ev: EvFactory, clang_without_tsan_runtime: Path) -> None:
    ev = make_ev(SMALL, race_compiler=str(clang_without_tsan_runtime))
    r = evaluate(ev, (HACKS / "control_private_acc.c").read_text())  # ok with a working sanitizer (test_hacks)
    assert r.status == "rejected", show(r)
    assert r.reason.startswith("race check unavailable: clang's ThreadSanitizer runtime is missing"), r.reason
    assert "libclang-rt-14-dev" in r.reason and "--no-race-check" in r.reason
    assert r.verification.race_check == "unavailable" and "libclang_rt.tsan" in r.log


@needs_clang
def test_missing_clang_rejects(make_ev: EvFactory) -> None:
    r = evaluate(make_ev(SMALL, race_compiler="clang-not-installed"), (HACKS / "control_private_acc.c").read_text())
    assert r.status == "rejected", show(r)
    assert r.reason.startswith("race check unavailable: clang-not-installed not found (install clang"), r.reason


@needs_clang
def test_require_rejects_what_the_static_check_cannot_prove(make_ev: EvFactory) -> None:
    """eval.race_static = "require": a race-free kernel the static check cannot prove (c24, a `nowait` whose loops map
    iterations to threads alike) is `unproven`, rejected, though the sanitizer finds nothing."""
    ev = make_ev(SUITE / "task", race_static="require")
    cand = Candidate(files={ev.task.kernel: (SUITE / "kernels" / "c24_nowait_same_mapping.c").read_text()})
    with ev.session():
        prog, _ = ev.build(cand)
        try:
            got, detail = race.check(ev, cand, (prog.parent / "nm.txt").read_text())
        finally:
            shutil.rmtree(prog.parent, ignore_errors=True)
    assert got == "unproven" and "eval.race_static is require" in detail and "ThreadSanitizer reported no race" in detail


@needs_clang
def test_turned_off_is_off_not_skipped(make_ev: EvFactory) -> None:
    """Off by config: the racy h17b passes the sweep and is not race-checked; its verdict says so."""
    r = evaluate(make_ev(SMALL, race_check=False), (HACKS / "h17b_gemm_shared_acc.c").read_text())
    assert r.status == "ok", show(r)
    assert r.verification.race_check == "off" and "--no-race-check" in r.verification.race_detail


@needs_clang
def test_serial_kernel_is_skipped_by_its_object(make_ev: EvFactory) -> None:
    """No OpenMP runtime calls in the object (a pragma in a comment, h16): nothing to check."""
    r = evaluate(make_ev(SMALL, rounds=2), (HACKS / "h16_comment_parallel.c").read_text())
    assert r.status == "ok", show(r)
    assert r.verification.race_check == "skipped" and "no OpenMP runtime calls" in r.verification.race_detail


@needs_clang
def test_task_turns_it_off(make_ev: EvFactory) -> None:
    task = load_task(SMALL)
    off = task.model_copy(update={"verify": task.verify.model_copy(update={"race_check": False})})
    r = evaluate(make_ev(off), (HACKS / "control_private_acc.c").read_text())
    assert r.status == "ok", show(r)
    assert r.verification.race_check == "off" and r.verification.race_detail == "turned off by the task"


def test_bench_summary_says_race_check_off() -> None:
    console = Console(record=True, width=200)
    summary = {"tasks": [], "suite": suite_figures([]), "bench": {"run_config": {"eval": {"race_check": False}}}}
    print_bench_summary(console, summary, Path("summary.json"), Path("summary.csv"))
    assert "race check: OFF for every task" in console.export_text()
    console = Console(record=True, width=200)
    print_bench_summary(console, {**summary, "bench": {"run_config": {"eval": {"race_check": True}}}}, Path("a"), Path("b"))
    assert "race check" not in console.export_text()


def kernopt_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kernopt", *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ}, timeout=600)


@needs_clang
def test_eval_no_race_check_says_off() -> None:
    p = kernopt_cli("eval", str(SMALL), "--candidate", str(HACKS / "control_private_acc.c"), "--sandbox", "local",
                    "--no-race-check", "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["status"] == "ok" and out["race_check"] == "off"
    assert out["verification"]["race_check"] == "off"


def test_run_summary_says_race_check_off() -> None:
    """The run summary records the setting and the verdicts; the end-of-run text and each progress line show them."""
    cand = Candidate(files={"kernel.c": ""}, idea="an idea")
    off = EvalResult(candidate_id=cand.id, status="ok", verification=Verification(race_check="off"))
    config = RunConfig(task=str(SMALL), eval=EvalConfig(race_check=False))
    store = SimpleNamespace(run_id="r1", root=Path("runs/r1"))
    made = make_summary(store, load_task(SMALL), config, [(cand, off)], None, None, 1.0)  # type: ignore[arg-type]
    assert made["race_check"] == "off" and made["race_checks"] == {"off": 1}
    console = Console(record=True, width=200)
    ProgressHooks(console, 1).on_eval_done(cand, off, False, None)
    assert "race off" in console.export_text()
    console = Console(record=True, width=200)
    summary = {"candidates": 3, "statuses": {"ok": 3}, "elapsed_s": 12.0, "race_check": "off", "race_checks": {"off": 3}}
    print_summary(console, summary, Path("runs/x"))
    text = console.export_text()
    assert "race check: OFF (--no-race-check)" in text
    on = {**summary, "race_check": "on", "race_checks": {"clean": 2, "unavailable": 1}}
    console = Console(record=True, width=200)
    print_summary(console, on, Path("runs/x"))
    assert "race check: clean 2, unavailable 1" in console.export_text()


# ---------------------------------------------------------------- the race suite, a CI-sized sample
def suite_kernels() -> list[dict[str, object]]:
    return list(tomllib.loads((SUITE / "manifest.toml").read_text())["kernel"])


def test_race_suite_is_balanced() -> None:
    kernels = [k for k in suite_kernels() if not k.get("construct")]
    racy = sum(bool(k["racy"]) for k in kernels)
    assert len(kernels) >= 40 and racy == len(kernels) - racy
    assert all((SUITE / "kernels" / str(k["file"])).is_file() for k in suite_kernels())


# name: (the gate's verdict, the sanitizer's alone). c24 and c35 are race-free but beyond what the static check proves
# (a `nowait` whose two loops map iterations to threads alike; task dependences): the sanitizer decides (clean).
SAMPLE = {"r01_sum_no_reduction": ("race", "race"), "r16_stencil_in_place": ("race", "race"),
          "r22_scan_single_nowait": ("race", "race"), "r35_task_missing_depend": ("race", "race"),
          "c01_sum_reduction": ("clean", "clean"), "c24_nowait_same_mapping": ("clean", "clean"),
          "c35_task_depend": ("clean", "clean"), "c41_lock_shared": ("clean", "clean"),
          "u01_teams_distribute": ("unavailable", "unavailable")}


@needs_clang
@pytest.mark.parametrize("name,verdicts", sorted(SAMPLE.items()))
def test_race_suite_sample(make_ev: EvFactory, name: str, verdicts: tuple[str, str]) -> None:
    """The gate's own code and configuration on suite kernels whose verdict is stable (r22 races only
    from 3 threads on; clang 14's sanitizer cannot judge u01's `teams`), and the sanitizer's runs alone
    (behind the system-call filter, their report file read back), so both checks are seen to be live."""
    ev = make_ev(SUITE / "task")
    cand = Candidate(files={ev.task.kernel: (SUITE / "kernels" / f"{name}.c").read_text()})
    with ev.session():
        prog, _ = ev.build(cand)
        try:
            got, detail = race.check(ev, cand, (prog.parent / "nm.txt").read_text())
            dynamic, dynamic_detail = race.dynamic(ev, cand, race.preprocess(ev, cand))
        finally:
            shutil.rmtree(prog.parent, ignore_errors=True)
    assert (got, dynamic) == verdicts, f"{detail}\n{dynamic_detail}"
    if got == "clean":  # says which check proved what
        assert detail.startswith("proven race-free from the source") or "the static check could not prove it" in detail
    if verdicts[1] == "race":
        assert re.match(r"ThreadSanitizer reported a data race at \d+ threads \(-O[01]\): kernel\.c:\d+ in ", dynamic_detail)
    if got == "unavailable":
        assert "cannot judge `teams`" in detail


# ---------------------------------------------------------------- what is built (the report file: tests/test_tsan_report.py)
@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_preprocessed_as_gcc_sees_it(tmp_path: Path) -> None:
    """What the sanitizer build compiles: gcc's branches and gcc's macro values, pasted names included,
    with the kernel's system headers back as #include lines (clang compiles with its own)."""
    src = ("#include <math.h>\n#define CAT(a, b) a##b\n#ifdef __clang__\nint which = 1;\n#else\nint which = 2;\n#endif\n"
           "int version = CAT(__GN, UC__);\ndouble pi = M_PI;\n")
    (tmp_path / "kernel.c").write_text(src)
    subprocess.run(["gcc", "-fopenmp", "-E", "-dD", "kernel.c", "-o", "kernel.i"], cwd=tmp_path, check=True)
    out = race.restore_includes((tmp_path / "kernel.i").read_text(), src)
    assert "#include <math.h>" in out and "which = 2" in out and "which = 1" not in out
    assert "version = CAT" not in out and "version = 4;" not in out and "3.14159" in out
    assert "extern" not in out  # no header content


def test_text_gate_refuses_what_blinds_the_sanitizer() -> None:
    for src, word in (('__attribute__((no_sanitize("thread"))) void f(void) {}', "no_sanitize"),
                      ("__attribute__((no_sanitize_thread)) void f(void) {}", "no_sanitize_thread"),
                      ("int f(void) { return __TIME__[7] & 1; }", "__TIME__"),
                      ("int f(int k) { return __builtin_constant_p(k); }", "__builtin_constant_p")):
        why = check_text(src)
        assert why is not None and word in why, (src, why)


def test_missing_sanitizer_headers_name_the_package() -> None:
    """Without libclang-rt-14-dev the sanitizer's headers are gone too, and the driver's compile fails first (seen in a
    bare Debian root file system with the package removed): the same fix is named, not "write C that clang compiles"."""
    why = race._build_failure("driver.c:41:10: fatal error: 'sanitizer/common_interface_defs.h' file not found", "clang")
    assert why.startswith("clang's ThreadSanitizer runtime is missing") and "libclang-rt-14-dev" in why
