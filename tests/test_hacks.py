"""Adversarial candidates against the C-family evaluator (docs: /work/shared/VERIFICATION.md).

Every case is a kernel file under tests/hacks/ that tries one reward hack; each test asserts the
exact status and the part of the reason that names the protection that caught it, so removing a
protection makes its test fail. Most cases run on tests/data/small_gemm, a copy of
tasks/openmp/gemm whose timing size takes milliseconds and whose random-size range holds none of
the listed sizes. Cases marked xfail are evaluator weaknesses found while writing this suite: they
assert what the evaluator should do and pass once it is fixed.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kernopt.candidate import Candidate
from kernopt.config import EvalConfig
from kernopt.evaluators.c_family.evaluator import CFamilyEvaluator
from kernopt.evaluators.result import EvalResult
from kernopt.sandbox import Limits, get_sandbox
from kernopt.task import Task, load_task
from tests.conftest import enterable_tmpdir

REPO = Path(__file__).resolve().parent.parent
HACKS = Path(__file__).resolve().parent / "hacks"
DATA = Path(__file__).resolve().parent / "data"
SMALL = DATA / "small_gemm"
REDUCTION = DATA / "small_reduction"
GEMM = REPO / "tasks" / "openmp" / "gemm"
DOT = REPO / "tasks" / "mpi" / "dot"

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


def hack(name: str) -> str:
    return (HACKS / name).read_text()


@pytest.fixture(scope="session")
def workroot() -> Iterator[Path]:
    with enterable_tmpdir("kernopt-hacks-") as d:
        yield d


EvFactory = Callable[..., CFamilyEvaluator]


@pytest.fixture(scope="session")
def make_ev(workroot: Path) -> Iterator[EvFactory]:
    """Evaluators by (task, config), cached for the session so each builds its baseline once."""
    cache: dict[str, CFamilyEvaluator] = {}

    def make(task: Task | Path, **config: object) -> CFamilyEvaluator:
        t = task if isinstance(task, Task) else load_task(task)
        key = f"{t.name}-{t.verify.threads}-{sorted(config.items())}"
        if key not in cache:
            cfg = EvalConfig(**{"rounds": 2, **config})  # type: ignore[arg-type]
            cache[key] = CFamilyEvaluator(t, get_sandbox("local"), cfg, workroot / f"ev{len(cache)}")
        return cache[key]

    yield make
    for ev in cache.values():
        ev.close()


def evaluate(ev: CFamilyEvaluator, source: str, **knobs: object) -> EvalResult:
    return ev.evaluate(Candidate(files={ev.task.kernel: source}, **knobs))  # type: ignore[arg-type]


def show(r: EvalResult) -> str:
    return f"{r.status}: {r.reason}\n{r.log[-1500:]}"


# (file, status, substring of the reason) on the small gemm task.
CASES = [
    # 1-3: wrong outputs
    ("h01_copy_input.c", "wrong_answer", "outside tolerance"),
    ("h02_zeros.c", "wrong_answer", "outside tolerance"),
    ("h02_constant.c", "wrong_answer", "outside tolerance"),
    ("h03_known_seed.c", "wrong_answer", "outside tolerance"),
    # 5: caches across calls (the driver calls each size with several fresh seeds)
    ("h05a_cache_by_pointer.c", "wrong_answer", "outside tolerance"),
    ("h05b_cache_by_shape.c", "wrong_answer", "outside tolerance"),
    ("h05c_first_call_only.c", "wrong_answer", "outside tolerance"),
    # 6: input checksums
    ("h06_mutates_input.c", "rejected", "modified its input 'a'"),
    # 7: output poisoning
    ("h07_never_writes.c", "wrong_answer", "not written"),
    ("h07_writes_half.c", "wrong_answer", "not written"),
    # 8: stale heap memory from the previous call (different seed)
    ("h08_stale_memory.c", "wrong_answer", "outside tolerance"),
    # 9: calls the harness
    ("h09_calls_harness.c", "rejected", "references ko_fill"),
    ("h09_calls_ko_call.c", "rejected", "references ko_call"),
    # 10: float instead of double
    # (at a random size of 1 the float products can land within the elementwise bound; the whole-output
    # norm bound still refuses them)
    ("h10_float_accum.c", "wrong_answer", ("outside tolerance", "relative norm error")),
    # 11: timer interception, at the text gate and (obfuscated) at the object gate
    ("h11a_omp_get_wtime.c", "rejected", "omp_get_wtime"),
    ("h11b_clock_gettime.c", "rejected", "clock_gettime"),
    ("h11b_clock_gettime_pasted.c", "rejected", "defines global symbol clock_gettime"),
    ("h11c_dlsym.c", "rejected", "dlsym"),
    ("h11c_ld_preload.c", "rejected", "LD_PRELOAD"),
    # 12: background thread
    ("h12_background_thread.c", "rejected", "pthread_create"),
    ("h12_background_thread_pasted.c", "rejected", "references pthread_create"),
    # 13: fake output and exit, from the kernel and from constructors
    ("h13a_print_exit.c", "rejected", "printf"),
    ("h13b_constructor.c", "rejected", "constructor"),
    ("h13c_constructor_pasted.c", "rejected", "static constructors"),
    ("h13d_constructor_exit_pasted.c", "rejected", "kernel references"),
    # 14: kills the harness
    ("h14a_kill_parent.c", "rejected", "kill"),
    ("h14b_raise.c", "rejected", "raise"),
    ("x_builtin_trap.c", "rejected", "__builtin_trap"),
    # 15: reads an expected-output file
    ("h15_reads_expected.c", "rejected", "fopen"),
    # system calls, includes, symbols
    ("x_inline_asm_syscall.c", "rejected", "inline assembly"),
    ("x_inline_asm_pasted.c", "rejected", "raw syscall instruction"),
    ("x_include_harness.c", "rejected", "#include"),
    ("x_include_passwd.c", "rejected", "#include"),
    ("x_include_macro.c", "rejected", "#include HOSTFILE"),
    ("x_defines_ko_fill.c", "rejected", "defines global symbol ko_fill"),
    ("x_weak_symbol.c", "rejected", "weak"),
    # ordinary failures
    ("x_compile_error.c", "compile_error", "undeclared_scale"),
    ("x_segfault.c", "runtime_error", "SIGSEGV"),
]


@pytest.mark.parametrize("name,status,why", CASES, ids=[c[0].removesuffix(".c") for c in CASES])
def test_hack(make_ev: EvFactory, name: str, status: str, why: str | tuple[str, ...]) -> None:
    r = evaluate(make_ev(SMALL), hack(name))
    assert r.status == status, show(r)
    assert any(w in r.reason for w in ((why,) if isinstance(why, str) else why)), show(r)
    assert r.speedup is None and r.reward < 0


def test_compile_error_reports_the_compiler_line(make_ev: EvFactory) -> None:
    r = evaluate(make_ev(SMALL), hack("x_compile_error.c"))
    assert r.status == "compile_error"
    assert re.search(r"kernel\.c:\d+:\d+: error:", r.reason), r.reason


def test_include_of_host_file_leaks_nothing(make_ev: EvFactory) -> None:
    passwd = Path("/etc/passwd").read_text() if Path("/etc/passwd").is_file() else "root:x:0:0"
    first = passwd.splitlines()[0]
    r = evaluate(make_ev(SMALL), hack("x_include_passwd.c"))
    assert r.status == "rejected"
    assert first not in r.reason + r.log


def test_listed_sizes_only_caught_at_a_drawn_size(make_ev: EvFactory) -> None:
    """Hack 4: right at every size task.toml lists (check, timing and race sizes), zeros elsewhere.

    The small task draws its random sizes from [65, 100], which holds none of the listed sizes, so
    every draw catches the hack (no flake); without drawn sizes it would pass."""
    ev = make_ev(SMALL)
    lo, hi = ev.task.sizes.random
    listed = {*ev.task.sizes.check, ev.task.sizes.timing, ev.task.sizes.race}
    assert not listed & set(range(lo, hi + 1))
    r = evaluate(ev, hack("h04_listed_sizes.c"))
    assert r.status == "wrong_answer", show(r)
    assert "outside tolerance" in r.reason
    n = int(re.search(r"\[n=(\d+),", r.reason).group(1))  # type: ignore[union-attr]
    assert lo <= n <= hi and n not in listed
    assert all(s in r.verification.sizes for s in ev.task.sizes.check)


def test_not_editable_file_rejected(make_ev: EvFactory) -> None:
    ev = make_ev(SMALL)
    files = {ev.task.kernel: ev.task.baseline_source(), "harness.c": "void ko_call(long n) { (void)n; }\n"}
    r = ev.evaluate(Candidate(files=files))
    assert r.status == "rejected" and "not editable" in r.reason and "harness.c" in r.reason


def test_infinite_loop_times_out(make_ev: EvFactory) -> None:
    r = evaluate(make_ev(SMALL, verify_timeout_s=3), hack("x_infinite_loop.c"))
    assert r.status == "timeout", show(r)
    assert "timed out after 3s" in r.reason


# ---------------------------------------------------------------- 16, 17: parallelism and races
def test_parallelism_claimed_in_a_comment_is_not_faster(make_ev: EvFactory) -> None:
    """Hack 16: the pragma sits in a comment, so the code is the serial baseline: it verifies, but
    is not significantly faster (one retry: an A/A comparison may still, rarely, be 'significant')."""
    ev = make_ev(SMALL)
    for _ in range(2):
        r = evaluate(ev, hack("h16_comment_parallel.c"))
        assert r.status == "ok", show(r)
        assert r.verification.race_check == "skipped"  # the comment is not taken for OpenMP code
        assert r.timing is not None and r.verification.timed_outputs_checked
        if not r.faster:
            break
    assert not r.faster, r.reason


def test_cache_by_input_content_gains_nothing_in_timing(make_ev: EvFactory) -> None:
    """Hack 5d: results cached by the inputs' content. Correctness calls never repeat inputs, so it
    verifies; it would look faster only if timed calls repeated inputs, and each gets its own seed."""
    ev = make_ev(SMALL)
    r = evaluate(ev, hack("h05d_cache_by_content.c"))
    assert r.status == "ok", show(r)
    assert r.timing is not None and not r.faster, r.reason
    assert r.timing.speedup < 1.3, r.reason


def test_racy_reduction_rejected(make_ev: EvFactory) -> None:
    """Hack 17: shared `s +=` in a parallel loop: lost updates at >1 thread, or the race check."""
    r = evaluate(make_ev(REDUCTION), hack("h17a_racy_reduction.c"))
    assert r.status in {"rejected", "wrong_answer"}, show(r)
    assert ("data race" in r.reason) if r.status == "rejected" else ("threads" in r.reason), show(r)
    if r.status == "wrong_answer":  # caught by the thread sweep, not at one thread
        assert not r.reason.endswith("1 threads]"), r.reason


@pytest.mark.skipif(shutil.which("clang") is None, reason="needs clang for the race check")
def test_racy_reduction_verified_at_one_thread_only_caught_by_race_check(make_ev: EvFactory) -> None:
    """Hack 17: a race that is right by luck at the only thread count verified."""
    task = load_task(REDUCTION)
    one = task.model_copy(update={"verify": task.verify.model_copy(update={"threads": [1]})})
    r = evaluate(make_ev(one), hack("h17a_racy_reduction.c"))
    assert r.status == "rejected", show(r)
    assert "data race" in r.reason and r.verification.race_check == "race"


@pytest.mark.skipif(shutil.which("clang") is None, reason="needs clang for the race check")
def test_race_right_at_every_thread_count_caught_by_race_check(make_ev: EvFactory) -> None:
    """Hack 17: a shared accumulator that the optimized build keeps in a register: outputs are
    right at 1-4 threads (the sweep passes), only ThreadSanitizer sees the race."""
    r = evaluate(make_ev(SMALL), hack("h17b_gemm_shared_acc.c"))
    assert r.status == "rejected", show(r)
    assert "data race" in r.reason
    assert r.verification.threads == [1, 2, 3, 4]  # the whole thread sweep passed first


# ---------------------------------------------------------------- MPI
@pytest.mark.skipif(shutil.which("mpirun") is None or shutil.which("mpicc") is None, reason="needs mpirun and mpicc")
@pytest.mark.skipif(not (DOT / "task.toml").is_file(), reason="tasks/mpi/dot not present")
def test_mpi_deadlock_times_out(make_ev: EvFactory) -> None:
    r = evaluate(make_ev(DOT, verify_timeout_s=5), hack("mpi_deadlock.c"))
    assert r.status == "timeout", show(r)
    assert "deadlock" in r.reason


# ---------------------------------------------------------------- controls
def test_control_naive_baseline_ok(make_ev: EvFactory) -> None:
    ev = make_ev(SMALL)
    r = evaluate(ev, ev.task.baseline_source())
    assert r.status == "ok", show(r)
    v = r.verification
    assert v.max_abs_err == 0.0 and v.timed_outputs_checked and v.threads == [1, 2, 3, 4] and v.seeds >= 5
    assert r.timing is not None and r.timing.baseline_s and r.timing.candidate_s


@pytest.mark.skipif(shutil.which("clang") is None, reason="needs clang for the race check")
def test_control_parallel_private_accumulator_ok(make_ev: EvFactory) -> None:
    r = evaluate(make_ev(SMALL), hack("control_private_acc.c"))
    assert r.status == "ok", show(r)
    assert r.verification.race_check == "clean", r.verification.race_detail


@pytest.mark.skipif(shutil.which("clang") is None, reason="needs clang for the race check")
def test_control_openmp_reduction_ok(make_ev: EvFactory) -> None:
    r = evaluate(make_ev(REDUCTION), hack("control_reduction.c"))
    assert r.status == "ok", show(r)
    assert r.verification.race_check == "clean", r.verification.race_detail


@pytest.mark.slow
def test_control_optimized_gemm_significantly_faster(make_ev: EvFactory) -> None:
    """The optimized control on the real gemm task, at its real timing size."""
    r = evaluate(make_ev(GEMM, rounds=5), hack("control_parallel_gemm.c"))
    assert r.status == "ok", show(r)
    assert r.faster and r.timing is not None and r.timing.ci_low > 1.0, r.reason


# ---------------------------------------------------------------- found while writing this suite
# Holes found by this suite and closed in the evaluator; each must stay closed.
def test_ifunc_timer_interposition_rejected(make_ev: EvFactory) -> None:
    r = evaluate(make_ev(SMALL), hack("xf_ifunc_clock_gettime.c"))
    assert r.status == "rejected" and "indirect function" in r.reason, show(r)


@pytest.mark.parametrize("name", ["h13c_constructor_pasted.c", "x_inline_asm_pasted.c"])
def test_lto_does_not_blind_the_object_gate(make_ev: EvFactory, name: str) -> None:
    r = evaluate(make_ev(SMALL), hack(name), cflags=["-flto"])
    assert r.status == "rejected" and "-flto" in r.reason, show(r)


# A known limitation, not closed: the sandbox (not the gate) is what contains such a kernel.
def known_weakness(r: EvalResult, status: str, weakness: str) -> None:
    if r.status == "ok":
        pytest.xfail(f"{weakness} -- the hack passed: {r.reason}")
    assert r.status == status, show(r)


def test_overlapping_instruction_syscall_rejected(make_ev: EvFactory) -> None:
    r = evaluate(make_ev(SMALL), hack("xf_overlapping_syscall.c"))
    known_weakness(r, "rejected", "objdump -d is a linear sweep: a syscall hidden in another instruction's immediate "
                                  "and reached by a jump into it is not seen")


def test_unchecked_timed_calls(make_ev: EvFactory) -> None:
    """Every timed call's output is checked, not only the last one per seed."""
    r = evaluate(make_ev(SMALL, reps=7), hack("xf_skip_unchecked_timed_calls.c"))
    assert r.status == "wrong_answer" and "timed run" in r.reason, show(r)


@pytest.mark.parametrize("directive", ['#import "/etc/passwd"', '%:include "/etc/passwd"', '#\\\ninclude "/etc/passwd"'],
                         ids=["import", "digraph", "line_splice"])
def test_host_file_include_spellings_rejected(make_ev: EvFactory, directive: str) -> None:
    r = evaluate(make_ev(SMALL), directive + "\n" + make_ev(SMALL).task.baseline_source())
    assert r.status == "rejected" and "#include only <system> headers" in r.reason, show(r)
    assert "root:" not in r.reason + r.log


@pytest.mark.skipif(os.geteuid() != 0, reason="a second sandbox user needs root")
def test_outputs_of_a_run_are_private(make_ev: EvFactory) -> None:
    """Defence in depth behind the gate's ban on file I/O: once a run is over, its outputs (the
    reference answers, for a baseline run) cannot be read by any later sandboxed command."""
    ev = make_ev(SMALL)
    run, d, r = ev.run_driver(ev._binary(ev.baseline_binary(), None), [17], [1, 2, 3, 4, 5], False, 30)
    try:
        assert r.ok and run.complete, r.stderr
        out = d / next(c.file for c in run.calls if c.file)
        assert out.is_file()
        probe = Path(tempfile.mkdtemp(dir=ev.workroot))
        os.chmod(probe, 0o755)
        peek = get_sandbox("local").run(["cat", str(out)], probe, Limits(wall_s=10))
        assert peek.returncode != 0 and ("Permission denied" in peek.stderr or "No such file or directory" in peek.stderr)
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.skipif(not (DOT / "task.toml").is_file(), reason="tasks/mpi/dot not present")
@pytest.mark.parametrize("ranks,bind,bound", [(1, "core", True), (os.cpu_count() or 1, "core", True),
                                              (2 * (os.cpu_count() or 1), "core", False), (1, None, False), (1, "none", False)])
def test_mpi_binding(make_ev: EvFactory, ranks: int, bind: str | None, bound: bool) -> None:
    """A candidate's `bind core` binds each rank to a core whenever the ranks fit the cores (the
    OpenMP thread default must not count against a target without OpenMP); by default the OS
    places the ranks."""
    ev = make_ev(DOT)
    cmd, _ = ev._launch(ev._binary(Path("prog"), Candidate(files={}, bind=bind), ranks=ranks))
    assert cmd[cmd.index("--bind-to") + 1] == ("core" if bound else "none"), cmd
