"""The torch-family evaluator without a GPU: real runner processes in the local sandbox, Triton under
its interpreter (TRITON_INTERPRET=1) on CPU tensors.

Each case is a small edit of tasks/triton/vector_add's own solution. Runtime checks are tested with
the static gate switched off (`no_gate`), so each test shows that the runner and the host catch the
case on their own; one test shows the gate is wired in. The sandbox runs the Python named by
KERNOPT_TORCH_PYTHON (default: this interpreter); without torch and triton there, the file skips.
"""

from __future__ import annotations

import ast
import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from kernopt.candidate import Candidate
from kernopt.config import EvalConfig
from kernopt.errors import InfraError
from kernopt.evaluators.result import EvalResult, Verification
from kernopt.evaluators.torch_family import evaluator as torch_family
from kernopt.evaluators.torch_family.compare import Comparison, consistent, fallback_op, load_arrays, read_run
from kernopt.evaluators.torch_family.evaluator import EvalFail as _Fail
from kernopt.evaluators.torch_family.evaluator import TorchEvaluator
from kernopt.evaluators.torch_family.host import INTERPRETER
from kernopt.sandbox import get_sandbox
from kernopt.task import Shapes, TorchTask, TorchTiming, TorchVerify, load_task
from tests.conftest import REPO, enterable_tmpdir

VECTOR_ADD = REPO / "tasks" / "triton" / "vector_add"
BASE = (VECTOR_ADD / "solution.py").read_text()
STORE = "tl.store(out_ptr + offs, a + b, mask=mask)"
ALLOC = "out = torch.empty_like(a)"


def edit(old: str, new: str) -> str:
    assert old in BASE
    return BASE.replace(old, new)


@pytest.fixture(scope="module")
def workroot() -> Iterator[Path]:
    with enterable_tmpdir("kernopt-torch-") as d:
        yield d


@pytest.fixture(scope="module")
def ev(workroot: Path) -> Iterator[TorchEvaluator]:
    evaluator = TorchEvaluator(load_task(VECTOR_ADD), get_sandbox("local"), EvalConfig(), workroot / "ev")
    try:
        with evaluator.session():
            dev = evaluator.device()
    except InfraError as e:
        pytest.skip(f"the local sandbox cannot run torch and triton ({e}); set KERNOPT_TORCH_PYTHON")
    if dev.cuda:
        pytest.skip("a GPU is visible: tests/test_torch_gpu.py covers this machine")
    yield evaluator
    evaluator.close()


@pytest.fixture
def no_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    """Switch the static gate off: the runtime checks must stand on their own."""
    monkeypatch.setattr(torch_family.py_gate, "check_python_source", lambda task, source: None)


def evaluate(ev: TorchEvaluator, source: str, **knobs: object) -> EvalResult:
    return ev.evaluate(Candidate(files={ev.task.kernel: source}, **knobs))  # type: ignore[arg-type]


def show(r: EvalResult) -> str:
    return f"{r.status}: {r.reason}\n{r.log[-1500:]}"


# ---------------------------------------------------------------- end to end on the interpreter
def test_baseline_verifies_without_timing(ev: TorchEvaluator) -> None:
    r = evaluate(ev, BASE)
    assert r.status == "ok", show(r)
    assert r.flags == ["no_gpu_timing"] and r.timing is None and r.speedup is None and r.reward == 0.0
    assert r.verification.device == INTERPRETER and r.verification.seeds == 5
    assert len(r.verification.shapes) >= len(ev.task.shapes.check) + 1  # drawn shapes too
    assert "Triton interpreter" in r.reason and "no GPU" in r.reason
    assert r.verification.max_abs_err is not None and r.verification.max_abs_err < 1e-5
    assert not list(ev.workroot.iterdir()), "work directories are removed after an evaluation"


def test_knob_applied_verifies(ev: TorchEvaluator, no_gate: None) -> None:
    r = evaluate(ev, BASE, defines={"BLOCK_SIZE": "1024"})
    assert r.status == "ok", show(r)


@pytest.mark.parametrize("source, needle", [
    (edit("mask = offs < n", "mask = offs < n - 1"), "outside tolerance"),  # the last element is never written
    (edit(STORE, "tl.store(out_ptr + offs, tl.where(offs == n // 2, float('nan'), a + b), mask=mask)"), "not finite"),
    (edit(ALLOC, "out = torch.empty_like(a, dtype=torch.float64)"), "dtype torch.float64, the reference's has torch.float32"),
    (edit(ALLOC, "out = torch.empty((a.numel(), 1))"), "shape (1, 1), the reference's has (1,)"),
], ids=["off-by-one-mask", "nan", "dtype", "shape"])
def test_wrong_outputs(ev: TorchEvaluator, no_gate: None, source: str, needle: str) -> None:
    r = evaluate(ev, source)
    assert r.status == "wrong_answer", show(r)
    assert needle in r.reason and "seed" in r.reason and "n=" in r.reason, r.reason


def test_input_mutation_rejected(ev: TorchEvaluator, no_gate: None) -> None:
    r = evaluate(ev, edit(STORE, STORE + "\n    tl.store(a_ptr + offs, a * 0.5, mask=mask)"))
    assert r.status == "rejected" and "modified its input 0" in r.reason, show(r)


def test_dynamic_fallback_check_without_gate(ev: TorchEvaluator, no_gate: None) -> None:
    """torch's `a + b` inside forward: the aten op the reference runs shows up in the candidate's process."""
    source = edit("        return out", "        return a + b")
    with ev.session():
        with pytest.raises(_Fail) as info:
            ev.verify(source, Verification())
    assert info.value.status == "rejected"
    assert info.value.reason == "ModelNew.forward falls back to the reference's torch op aten.add"


def test_fallback_rejected_with_gate(ev: TorchEvaluator) -> None:
    r = evaluate(ev, edit("        return out", "        return a + b"))
    assert r.status == "rejected", show(r)


def test_syntax_error_and_unknown_knob_need_no_process(ev: TorchEvaluator) -> None:
    r = evaluate(ev, BASE.replace("def forward(self", "def forward(self,,"))
    assert r.status == "compile_error" and r.reason.startswith("solution.py does not compile: line ") and "\n" not in r.reason
    r = evaluate(ev, BASE, defines={"NOT_A_KNOB": "3"})
    assert r.status == "rejected" and "NOT_A_KNOB" in r.reason


def test_raise_at_import_is_runtime_error(ev: TorchEvaluator, no_gate: None) -> None:
    r = evaluate(ev, edit("BLOCK_SIZE = 128", "BLOCK_SIZE = 128\nraise ValueError('deliberately broken at import')"))
    assert r.status == "runtime_error", show(r)
    assert r.reason.startswith("importing solution.py raised ValueError: deliberately broken at import"), r.reason
    assert "Traceback" in r.log


def test_missing_nonce_is_runtime_error(ev: TorchEvaluator, no_gate: None) -> None:
    """A candidate that writes its own closing line and leaves with exit code 0 before the runner ends."""
    fake = ("import os as _os\n"
            "with open('result.jsonl', 'a') as _f:\n    _f.write('{\"done\": \"forged\"}\\n')\n")
    source = edit("        return out", "        _os._exit(0)").replace("BLOCK_SIZE = 128", fake + "BLOCK_SIZE = 128")
    r = evaluate(ev, source)
    assert r.status == "runtime_error" and "exited before the runner finished" in r.reason, show(r)


def test_time_mode_plumbing_on_cpu(ev: TorchEvaluator, workroot: Path) -> None:
    """Rounds, result parsing, statistics and the wall cross-check, at a tiny shape on the CPU. The
    evaluator never times without a GPU; this drives its timing code directly."""
    task = ev.task.model_copy(update={"shapes": Shapes(vars=["n"], check=[{"n": 7}], timing={"n": 3000}),
                                      "timing": TorchTiming(reps=3, warmup=1, rotate=2)})
    tev = TorchEvaluator(task, ev.sandbox, EvalConfig(), workroot / "timing")
    try:
        with tev.session():
            stats = tev.time(edit("BLOCK_SIZE = 128", "BLOCK_SIZE = 1024"), rounds=2)
    finally:
        tev.close()
    assert len(stats.baseline_s) == len(stats.candidate_s) == 2 * 3
    assert stats.device == INTERPRETER and stats.eager_median_s is not None and stats.compile_median_s is None
    assert stats.speedup > 0 and stats.ci_low <= stats.speedup <= stats.ci_high and 0 <= stats.p_value <= 1
    assert stats.consistent and not stats.significant  # two rounds can never be significant


def test_task_check_torch_branch(ev: TorchEvaluator) -> None:
    from kernopt.task_check import check_task

    checks = {c.name: c for c in check_task(ev.task, ev.sandbox)}
    assert list(checks) == ["load", "torch", "reference", "finite", "depends-on-inputs", "baseline", "timing"]
    assert all(c.ok for c in checks.values()), [c for c in checks.values() if not c.ok]
    assert "Triton interpreter" in checks["baseline"].detail and "no GPU" in checks["timing"].detail


# ---------------------------------------------------------------- host-side units (no processes)
def test_read_run_needs_the_nonce(tmp_path: Path) -> None:
    f = tmp_path / "result.jsonl"
    lines = [{"start": "candidate", "device": "cpu"},
             {"call": 0, "shape": {"n": 3}, "seed": 1, "file": "out0.npz", "outputs": {"t": "none"}, "mutated": None, "ops": ["aten.add"]},
             {"rep": 0, "warmup": False, "time": 0.5, "wall": 0.6}]
    f.write_text("\n".join(json.dumps(x) for x in [*lines, {"done": "abc"}]) + "\n")
    run = read_run(f, "abc")
    assert run.complete and run.device == "cpu" and run.calls[0].ops == ["aten.add"] and run.timed_s() == [0.5]
    assert not read_run(f, "other").complete
    f.write_text(json.dumps(lines[0]) + "\nnot json\n" + json.dumps({"done": "abc"}) + "\n")
    assert not read_run(f, "abc").complete  # nothing after a malformed line counts


def test_load_arrays_refuses_links_paths_and_junk(tmp_path: Path) -> None:
    np.savez(tmp_path / "out0.npz", a0=np.arange(3))
    assert list(load_arrays(tmp_path, "out0.npz")["a0"]) == [0, 1, 2]
    (tmp_path / "out1.npz").symlink_to(tmp_path / "out0.npz")  # a link could point at any file of the host
    (tmp_path / "out2.npz").write_text("not an archive")
    for name in ("out1.npz", "../out0.npz", "/etc/passwd", "out2.npz"):
        with pytest.raises(ValueError):
            load_arrays(tmp_path, name)


def _tensor(dtype: str = "torch.float32", shape: tuple[int, ...] = (3,), device: str = "cpu", key: str = "a0") -> dict:
    return {"t": "tensor", "dtype": dtype, "shape": list(shape), "device": device, "key": key}


def test_comparison_is_strict_about_type_dtype_shape_device() -> None:
    cmp = Comparison(TorchVerify())
    ref = {"a0": np.array([1.0, 2.0, 3.0], dtype=np.float32)}
    assert cmp.mismatch(_tensor(), ref, _tensor(), ref) is None
    assert "dtype torch.float64" in (cmp.mismatch(_tensor("torch.float64"), ref, _tensor(), ref) or "")
    assert "device cuda:0" in (cmp.mismatch(_tensor(device="cuda:0"), ref, _tensor(), ref) or "")
    assert "is a tuple of 1" in (cmp.mismatch({"t": "tuple", "items": [_tensor()]}, ref, _tensor(), ref) or "")
    assert "is a foo.Lazy" in (cmp.mismatch({"t": "other", "type": "foo.Lazy"}, ref, _tensor(), ref) or "")
    nan = {"a0": np.array([1.0, np.nan, 3.0], dtype=np.float32)}
    assert "not written or not finite" in (cmp.mismatch(_tensor(), nan, _tensor(), ref) or "")
    close = {"a0": np.array([1.0, 2.0 + 1e-5, 3.0], dtype=np.float32)}
    assert cmp.mismatch(_tensor(), close, _tensor(), ref) is None  # float32: rtol 1e-4
    ints = {"a0": np.array([1, 2, 3], dtype=np.int64)}
    off = {"a0": np.array([1, 2, 4], dtype=np.int64)}
    assert "differ" in (cmp.mismatch(_tensor("torch.int64"), off, _tensor("torch.int64"), ints) or "")  # integers: exact
    bf = {"a0": np.array([1.0, 2.0, 3.01], dtype=np.float32)}
    assert cmp.mismatch(_tensor("torch.bfloat16"), bf, _tensor("torch.bfloat16"), ref) is None  # bfloat16 tolerance


def test_fallback_op_ignores_glue_and_allowed_ops() -> None:
    ref = {"aten.mm", "aten.add", "aten.view", "aten.empty"}
    assert fallback_op({"aten.empty", "aten.copy_", "aten.new_empty", "aten.set_", "aten.view"}, ref, []) is None
    assert fallback_op({"aten.empty", "aten.mm"}, ref, []) == ("aten.mm", True)
    assert fallback_op({"aten.mm"}, ref, ["aten.mm"]) is None and fallback_op({"aten.mm"}, ref, ["mm"]) is None
    assert fallback_op({"aten.sum", "aten.stack"}, ref, []) == ("aten.stack", False)  # any torch compute op is a fallback
    assert fallback_op({"aten.sum", "aten.mm"}, ref, []) == ("aten.mm", True)  # the reference's own reported first


def test_consistency_catches_savings_the_clocks_do_not_show() -> None:
    honest = [{"base": (1e-3, 1.05e-3, 0.03, 2.5), "cand": (0.5e-3, 0.56e-3, 0.015, 2.49)}] * 3
    assert consistent(honest)
    faked_events = [{"base": (1e-3, 1.05e-3, 0.03, 2.5), "cand": (0.1e-3, 1.04e-3, 0.03, 2.5)}] * 3
    assert not consistent(faked_events)
    faked_walls = [{"base": (10.0, 10.0, 60.0, 62.0), "cand": (1.0, 1.0, 6.0, 62.0)}] * 3
    assert not consistent(faked_walls)


def test_unknown_python_is_an_infrastructure_error(workroot: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(torch_family.PYTHON_ENV, str(workroot / "no-such-python"))
    e = TorchEvaluator(load_task(VECTOR_ADD), get_sandbox("local"), EvalConfig(), workroot / "nopy")
    try:
        with pytest.raises(InfraError, match="KERNOPT_TORCH_PYTHON"):
            e.device()
    finally:
        e.close()


# ---------------------------------------------------------------- cuda target without a GPU: nvcc only
CUDA_REF = (VECTOR_ADD / "reference.py").read_text()
CUDA_SOLUTION = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = """
#define BLOCK 256
extern "C" __global__ void add_kernel(const float* a, const float* b, float* out, int n) {
    int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}
"""
cpp_src = "torch::Tensor add(torch::Tensor a, torch::Tensor b);"
module = load_inline(name="vadd", cpp_sources=cpp_src, cuda_sources=cuda_src, functions=["add"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return module.add(a, b)
'''


@pytest.fixture(scope="module")
def cuda_task(workroot: Path) -> TorchTask:
    d = workroot / "cuda_add"
    d.mkdir()
    (d / "reference.py").write_text(CUDA_REF)
    (d / "solution.py").write_text(CUDA_SOLUTION)
    (d / "task.toml").write_text('name = "cuda_add"\ntarget = "cuda"\ndescription = "a + b"\n'
                                 '[shapes]\nvars = ["n"]\ncheck = [{n = 5}]\ntiming = {n = 4096}\n')
    task = load_task(d)
    assert isinstance(task, TorchTask)
    return task


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_cuda_without_gpu_is_compiled_only(ev: TorchEvaluator, cuda_task: TorchTask, workroot: Path) -> None:
    cev = TorchEvaluator(cuda_task, ev.sandbox, EvalConfig(), workroot / "cuda")
    try:
        r = cev.evaluate(Candidate(files={"solution.py": CUDA_SOLUTION}))
        assert r.status == "unverified", show(r)
        assert r.reason.startswith("compiled for sm_90 with nvcc (") and "no GPU here, so not run or timed" in r.reason
        assert r.resources and r.resources[0].registers > 0 and r.verification.device == "none (compiled only)"
        r = cev.evaluate(Candidate(files={"solution.py": CUDA_SOLUTION.replace("out[i] = a[i] + b[i];", "out[i] = a[i] + c[i];")}))
        assert r.status == "compile_error" and "error" in r.reason and "\n" not in r.reason, show(r)
    finally:
        cev.close()


def test_runner_imports_only_torch_numpy_and_stdlib() -> None:
    tree = ast.parse(torch_family.runner_source().read_text())
    names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert names - {"numpy", "torch"} <= set(sys.stdlib_module_names), names


def test_runner_binds_its_clocks_and_synchronize_before_the_candidate(tmp_path: Path) -> None:
    """A candidate module that patches the clock, torch.cuda.synchronize and the C function behind it
    at import leaves the runner's own references untouched (the GPU timing path calls only those)."""
    import importlib.util
    import time

    import torch

    spec = importlib.util.spec_from_file_location("ko_runner_under_test", torch_family.runner_source())
    assert spec is not None and spec.loader is not None
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    originals = (time.perf_counter, getattr(torch._C, "_cuda_synchronize", None), torch.cuda.synchronize, torch.cuda.Event.record)
    hostile = tmp_path / "solution.py"
    hostile.write_text("import time, torch\n"
                       "time.perf_counter = lambda: 0.0\n"
                       "torch._C._cuda_synchronize = lambda: None\n"
                       "torch.cuda.synchronize = lambda *a, **k: None\n"
                       "torch.cuda.Event.record = lambda self, stream=None: None\n")
    try:
        runner._load("solution", str(hostile))
        assert runner._perf is originals[0] and runner._c_cuda_sync is originals[1]
        assert runner._ev_record is originals[3]
        assert runner._perf() > 0.0
    finally:
        time.perf_counter = originals[0]  # type: ignore[assignment]
        if originals[1] is not None:
            torch._C._cuda_synchronize = originals[1]
        torch.cuda.synchronize = originals[2]  # type: ignore[assignment]
        torch.cuda.Event.record = originals[3]  # type: ignore[method-assign]
