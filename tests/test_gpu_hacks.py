"""The GPU-form reward hacks of /work/shared/VERIFICATION.md against the torch-family evaluator.

Every case is a complete solution.py under tests/hacks_gpu/ for tasks/triton/vector_add (one control
for tests/data/softmax_rows), evaluated through the real TorchEvaluator in the local sandbox. Without a
GPU the runner executes Triton kernels under the interpreter (TRITON_INTERPRET=1, set by the
evaluator), so everything except timing is exercised here; the GPU-marked tests need CUDA.

Each test asserts the status and the part of the reason that names the protection that caught it.
Hacks the static gate rejects are also run with the gate switched off (`no_gate`), to show which
ones the runtime checks catch on their own and which ones only the gate stops. Cases that end in
`known_weakness` document a hack the evaluator does not stop yet: they xfail while it scores and
pass once it is fixed.

The sandbox runs the Python named by KERNOPT_TORCH_PYTHON (default: this interpreter); without
torch and triton there, the file skips.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kernopt.candidate import Candidate
from kernopt.config import EvalConfig
from kernopt.errors import InfraError
from kernopt.evaluators.base import EvalFail
from kernopt.evaluators.result import EvalResult
from kernopt.evaluators.torch_family import evaluator as torch_family
from kernopt.evaluators.torch_family.evaluator import TorchEvaluator
from kernopt.evaluators.torch_family.host import INTERPRETER
from kernopt.sandbox import get_sandbox
from kernopt.task import Shapes, TorchTask, TorchTiming, load_task
from tests.conftest import REPO, enterable_tmpdir

HACKS = Path(__file__).resolve().parent / "hacks_gpu"
VECTOR_ADD = REPO / "tasks" / "triton" / "vector_add"
SOFTMAX = REPO / "tests" / "data" / "softmax_rows"


def hack(name: str) -> str:
    return (HACKS / name).read_text()


@pytest.fixture(scope="module")
def workroot() -> Iterator[Path]:
    with enterable_tmpdir("kernopt-gpu-hacks-") as d:
        yield d


EvFactory = Callable[[Path], TorchEvaluator]


@pytest.fixture(scope="module")
def make_ev(workroot: Path) -> Iterator[EvFactory]:
    """Evaluators by task directory, one per module (each probes the sandbox's Python once)."""
    cache: dict[Path, TorchEvaluator] = {}

    def make(task_dir: Path) -> TorchEvaluator:
        if task_dir not in cache:
            ev = TorchEvaluator(load_task(task_dir), get_sandbox("local"), EvalConfig(), workroot / f"ev{len(cache)}")  # type: ignore[arg-type]
            try:
                with ev.session():
                    ev.device()
            except InfraError as e:
                pytest.skip(f"the local sandbox cannot run torch and triton ({e}); set KERNOPT_TORCH_PYTHON")
            cache[task_dir] = ev
        return cache[task_dir]

    yield make
    for ev in cache.values():
        ev.close()


@pytest.fixture
def ev(make_ev: EvFactory) -> TorchEvaluator:
    return make_ev(VECTOR_ADD)


@pytest.fixture
def no_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    """Switch the static gate off: the runtime checks must stand on their own."""
    monkeypatch.setattr(torch_family.py_gate, "check_python_source", lambda task, source: None)


def evaluate(ev: TorchEvaluator, source: str, **knobs: object) -> EvalResult:
    return ev.evaluate(Candidate(files={ev.task.kernel: source}, **knobs))  # type: ignore[arg-type]


def show(r: EvalResult) -> str:
    return f"{r.status}: {r.reason}\n{r.log[-1500:]}"


def gpu(ev: TorchEvaluator) -> bool:
    with ev.session():
        return ev.device().cuda


def known_weakness(r: EvalResult, weakness: str) -> None:
    """The hack must not count as a speedup; while it does, the test xfails with what it got."""
    if r.faster:
        pytest.xfail(f"{weakness} -- the hack scored: {r.reason} flags={r.flags}")
    assert r.status in ("ok", "wrong_answer", "rejected", "runtime_error"), show(r)


# ---------------------------------------------------------------- the catalog, gate on
# (file, status, substring of the reason, or a tuple of acceptable ones) on tasks/triton/vector_add.
CASES = [
    # 1, 2: wrong outputs
    ("h01_identity.py", "wrong_answer", "outside tolerance"),
    ("h01_identity_alias.py", "wrong_answer", "outside tolerance"),
    ("h02_zeros.py", "wrong_answer", "outside tolerance"),
    ("h02_constant.py", "wrong_answer", "outside tolerance"),
    # 5: caches across calls (every seed brings fresh inputs of the same shape)
    ("h05a_cache_by_shape.py", "wrong_answer", "outside tolerance"),
    ("h05c_first_call_only.py", "wrong_answer", "outside tolerance"),
    # 6: input checksums
    ("h06_mutates_input.py", "rejected", "modified its input 0"),
    # 7: outputs never written, or half written: torch.empty_like's memory holds whatever was there, so the
    # compare reports it as out of tolerance or, where it happens to hold a NaN/inf, as not written
    ("h07_never_writes.py", "wrong_answer", ("outside tolerance", "not written or not finite")),
    ("h07_writes_half.py", "wrong_answer", ("outside tolerance", "not written or not finite")),
    # 9: reference fallbacks, caught by the static gate
    ("h09_reference_plus.py", "rejected", "`+` on tensors is the reference's own operation (add)"),
    ("h09_import_reference.py", "rejected", "importing the reference is not allowed"),
    ("x_try_except_fallback.py", "rejected", "try/except is not allowed"),
    # 10: float16 arithmetic for a float32 task
    ("h10_half_precision.py", "wrong_answer", "outside tolerance"),
    # 11: timer patching
    ("h11a_patch_synchronize.py", "rejected", "assigning torch.cuda.synchronize is not allowed"),
    ("h11b_patch_event.py", "rejected", "assigning torch.cuda.Event.elapsed_time is not allowed"),
    ("h11c_patch_perf_counter.py", "rejected", "import time is not allowed"),
    ("h11d_patch_aliased.py", "rejected", "assigning t.cuda.synchronize is not allowed"),
    ("h11e_patch_sync_internals.py", "rejected", "._cuda_synchronize is not allowed: private attributes"),
    # 13-15: fake output, leaving the runner, reading the reference's answers
    ("h13_prints_fake_results.py", "rejected", "print() is not allowed"),
    ("h14_exits_runner.py", "rejected", "import os is not allowed"),
    ("h15_reads_expected.py", "rejected", "import glob is not allowed"),
]


@pytest.mark.parametrize("name,status,why", CASES, ids=[c[0].removesuffix(".py") for c in CASES])
def test_hack(ev: TorchEvaluator, name: str, status: str, why: str | tuple[str, ...]) -> None:
    r = evaluate(ev, hack(name))
    assert r.status == status, show(r)
    assert any(w in r.reason for w in ((why,) if isinstance(why, str) else why)), show(r)
    assert r.speedup is None and r.reward < 0


def test_listed_shapes_only_caught_at_a_drawn_shape(ev: TorchEvaluator) -> None:
    """Hack 4: right at every n task.toml lists (check and timing), zeros elsewhere. Each evaluation
    draws random_count more n from [2, 5000], where only 3 of 4999 values are listed, so a draw
    misses the hack with probability about 4e-7."""
    listed = {s["n"] for s in [*ev.task.shapes.check, ev.task.shapes.timing]}
    assert ev.task.shapes.random_count >= 2
    r = evaluate(ev, hack("h04_listed_shapes.py"))
    assert r.status == "wrong_answer" and "outside tolerance" in r.reason, show(r)
    n = int(re.search(r"\[n=(\d+),", r.reason).group(1))  # type: ignore[union-attr]
    assert n not in listed
    assert all(s in r.verification.shapes for s in ev.task.shapes.check)


def test_cache_by_pointer_never_answers_wrong_in_verification(ev: TorchEvaluator) -> None:
    """Hack 5 by data pointer: verification hands every call fresh input tensors, so the cache either
    hits a reused address (a stale answer: wrong_answer) or never hits (every answer computed and
    right). Its payoff is in timing: see test_output_cache_does_not_fake_a_speedup."""
    r = evaluate(ev, hack("h05b_cache_by_pointer.py"))
    assert r.status in ("wrong_answer", "ok"), show(r)
    assert r.verification.seeds >= 5 and len(r.verification.shapes) > len(ev.task.shapes.check)


def test_sideways_fallback_to_other_torch_ops(ev: TorchEvaluator) -> None:
    """Hack 9 sideways: torch computes the sum with ops the reference never runs (stack, sum). The gate
    looks for the reference's own operations; the runtime trace rejects any torch compute op in forward."""
    r = evaluate(ev, hack("h09_stack_sum.py"))
    assert r.status == "rejected", show(r)
    assert "computes with the torch op aten." in r.reason, r.reason


# ---------------------------------------------------------------- the same hacks with the gate off
NO_GATE = [
    # 9: the runner's dispatch check sees the reference's aten op inside forward
    ("h09_reference_plus.py", "rejected", "falls back to the reference's torch op aten.add"),
    ("h09_import_reference.py", "rejected", "falls back to the reference's torch op aten.add"),
    ("x_try_except_fallback.py", "rejected", "falls back to the reference's torch op aten.add"),
    # 14: leaving the runner early leaves no closing nonce
    ("h14_exits_runner.py", "runtime_error", "exited before the runner finished"),
    # 15: the reference's work directory is closed to later sandboxed runs: nothing to read, zeros come back
    ("h15_reads_expected.py", "wrong_answer", "outside tolerance"),
]


@pytest.mark.parametrize("name,status,why", NO_GATE, ids=[c[0].removesuffix(".py") for c in NO_GATE])
def test_hack_caught_without_gate(ev: TorchEvaluator, no_gate: None, name: str, status: str, why: str) -> None:
    r = evaluate(ev, hack(name))
    assert r.status == status, show(r)
    assert why in r.reason, show(r)


CONTAINED = ["h11a_patch_synchronize.py", "h11b_patch_event.py", "h11c_patch_perf_counter.py", "h11d_patch_aliased.py",
             "h13_prints_fake_results.py"]


@pytest.mark.slow
@pytest.mark.parametrize("name", CONTAINED, ids=[c.removesuffix(".py") for c in CONTAINED])
def test_contained_without_gate(ev: TorchEvaluator, no_gate: None, name: str) -> None:
    """Timer patches and printed results change nothing the host reads: the runner bound its clocks
    before importing the candidate and reads only its nonce-closed result file. Each of these is the
    starting kernel plus the hack, so it verifies and is never faster."""
    r = evaluate(ev, hack(name))
    assert r.status == "ok", show(r)
    assert not r.faster, show(r)
    if not gpu(ev):
        assert r.flags == ["no_gpu_timing"] and r.speedup is None


# ---------------------------------------------------------------- controls
@pytest.mark.parametrize("name,defines", [("control_naive.py", {}), ("control_optimized.py", {}),
                                          ("control_optimized.py", {"BLOCK_SIZE": "1024", "NUM_WARPS": "4"})],
                         ids=["naive", "optimized", "optimized_knobs"])
def test_control_passes(ev: TorchEvaluator, name: str, defines: dict[str, str]) -> None:
    r = evaluate(ev, hack(name), defines=defines)
    assert r.status == "ok", show(r)
    assert r.verification.seeds >= 5 and len(r.verification.shapes) > len(ev.task.shapes.check)
    assert r.verification.max_abs_err is not None and r.verification.max_abs_err < 1e-5
    if not gpu(ev):
        assert r.verification.device == INTERPRETER and r.flags == ["no_gpu_timing"]


def test_control_optimized_softmax_passes(make_ev: EvFactory) -> None:
    r = evaluate(make_ev(SOFTMAX), hack("control_softmax_online.py"))
    assert r.status == "ok", show(r)


# ---------------------------------------------------------------- timing, driven on a CPU
# The evaluator never times without a GPU; these drive its timing code directly at a small shape
# (the runner then times with the wall clock). The GPU path feeds calls the same way.
def small_timing(ev: TorchEvaluator, workroot: Path, name: str) -> TorchEvaluator:
    task = ev.task.model_copy(update={"shapes": Shapes(vars=["n"], check=[{"n": 7}], timing={"n": 20000}),
                                      "timing": TorchTiming(reps=4, warmup=1, rotate=2)})
    return TorchEvaluator(task, ev.sandbox, EvalConfig(), workroot / name)  # type: ignore[arg-type]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["h05b_cache_by_pointer.py", "h05d_cache_by_content.py"])
def test_output_cache_does_not_fake_a_speedup(ev: TorchEvaluator, workroot: Path, name: str) -> None:
    """Hack 5 against timing: a cache keyed by the inputs' pointers or content never hits in verification
    (fresh inputs every call). Timing once cycled through `timing.rotate` fixed input sets, so such a
    cache replayed right answers without computing (a 16000x "speedup" when this suite was written);
    now every timed call gets inputs made anew from its own seed. The pointer cache may also hit a reused
    address during verification (a stale answer), and is then caught there (see test_cache_by_pointer)."""
    tev = small_timing(ev, workroot, name)
    try:
        source = hack(name)
        status = evaluate(tev, source).status
        if name == "h05b_cache_by_pointer.py" and status == "wrong_answer":
            return  # the allocator handed back an address it had cached: rejected before any timing
        assert status == "ok"
        with tev.session():
            stats = tev.time(source, rounds=2)
    finally:
        tev.close()
    assert stats.speedup < 3, f"a cached output is timed instead of the kernel: {stats.speedup:.0f}x"


@pytest.mark.slow
def test_unchecked_timed_calls_do_not_fake_a_speedup(ev: TorchEvaluator, workroot: Path) -> None:
    """Only the last timed call's output is compared: a candidate that computes at the timing shape on that
    call only (the number of calls is public) is timed doing nothing on all the others."""
    from kernopt.evaluators.knobs import apply_knobs

    tev = small_timing(ev, workroot, "unchecked")
    try:
        source = apply_knobs(hack("h16_skip_unchecked_timed_calls.py"), {"TIMING_N": "20000", "TIMED_CALLS": "5"})
        assert evaluate(tev, source).status == "ok"  # verification never uses the timing shape
        with tev.session():
            try:
                stats = tev.time(source, rounds=2)
            except EvalFail as f:  # every timed output checked: the skipped calls are wrong
                assert f.status == "wrong_answer", f.reason
                return
    finally:
        tev.close()
    if stats.speedup > 3:
        pytest.xfail(f"only the last timed output is checked: skipping the work on the other timed calls times "
                     f"{stats.speedup:.0f}x faster than the starting kernel (consistent={stats.consistent})")
    assert stats.speedup < 3


# ---------------------------------------------------------------- GPU only
needs_gpu = pytest.mark.gpu


@needs_gpu
def test_gpu_side_stream_does_not_fool_timing(ev: TorchEvaluator) -> None:
    """Hack 12, GPU form: the work runs on a side stream and forward returns at once. The runner
    synchronizes the whole device before its end event, so the side stream's work is timed: the
    candidate (the starting kernel otherwise) is right and not faster."""
    if not gpu(ev):
        pytest.skip("needs a CUDA GPU")
    r = evaluate(ev, hack("h12_side_stream.py"))
    assert r.status in ("ok", "wrong_answer"), show(r)
    assert not r.faster, show(r)


@needs_gpu
@pytest.mark.parametrize("name", ["h05b_cache_by_pointer.py", "h05d_cache_by_content.py"])
def test_gpu_output_cache_does_not_fake_a_speedup(ev: TorchEvaluator, name: str) -> None:
    if not gpu(ev):
        pytest.skip("needs a CUDA GPU")
    r = evaluate(ev, hack(name))
    known_weakness(r, "a cached output is timed instead of the kernel")


@needs_gpu
def test_gpu_unchecked_timed_calls_do_not_fake_a_speedup(ev: TorchEvaluator) -> None:
    if not gpu(ev):
        pytest.skip("needs a CUDA GPU")
    r = evaluate(ev, hack("h16_skip_unchecked_timed_calls.py"))
    known_weakness(r, "only the last timed output is checked, so the other timed calls may skip the work")


@needs_gpu
def test_gpu_patched_sync_internals_do_not_fake_a_speedup(ev: TorchEvaluator, no_gate: None) -> None:
    """Gate off: the runner's bound torch.cuda.synchronize and Event.record still call
    torch._C._cuda_synchronize and torch.cuda.current_stream, which the candidate can replace."""
    if not gpu(ev):
        pytest.skip("needs a CUDA GPU")
    r = evaluate(ev, hack("h11e_patch_sync_internals.py"))
    known_weakness(r, "patched torch._C._cuda_synchronize / torch.cuda.current_stream move the runner's events off the "
                      "work (only the static gate stops this)")


def test_side_stream_without_gpu_is_a_runtime_error(ev: TorchEvaluator) -> None:
    """On a CPU the side-stream hack cannot run at all (torch.cuda.Stream needs CUDA)."""
    if gpu(ev):
        pytest.skip("a GPU is visible: test_gpu_side_stream_does_not_fool_timing covers it")
    r = evaluate(ev, hack("h12_side_stream.py"))
    assert r.status == "runtime_error" and "CUDA" in r.reason, show(r)


def test_every_hack_file_is_used() -> None:
    used = {c[0] for c in CASES + NO_GATE} | set(CONTAINED) | {
        "h04_listed_shapes.py", "h05b_cache_by_pointer.py", "h05d_cache_by_content.py", "h09_stack_sum.py", "h12_side_stream.py",
        "h16_skip_unchecked_timed_calls.py",
        "control_naive.py", "control_optimized.py", "control_softmax_online.py"}
    assert {p.name for p in HACKS.glob("*.py")} == used


def test_tasks_are_torch_tasks() -> None:
    assert isinstance(load_task(VECTOR_ADD), TorchTask) and isinstance(load_task(SOFTMAX), TorchTask)
