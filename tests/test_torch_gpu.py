"""The torch-family evaluator on a GPU: timing end to end, the side-stream hack, eager and
torch.compile comparisons, a cuda (load_inline) candidate. Skipped without torch.cuda."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kernopt.candidate import Candidate
from kernopt.config import EvalConfig
from kernopt.evaluators.result import EvalResult
from kernopt.evaluators.torch_family.evaluator import TorchEvaluator
from kernopt.sandbox import get_sandbox
from kernopt.task import Shapes, TorchTask, TorchTiming, load_task
from tests.conftest import REPO, enterable_tmpdir

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU (torch.cuda)")]

VECTOR_ADD = REPO / "tasks" / "triton" / "vector_add"
BASE = (VECTOR_ADD / "solution.py").read_text()
FAST = BASE.replace("BLOCK_SIZE = 128", "BLOCK_SIZE = 1024")
# Launches the kernel on a side stream and returns at once: timed on the default stream alone, this
# call would look almost free. The runner's full device synchronize before the end event catches it.
SIDE_STREAM = BASE.replace(
    "        out = torch.empty_like(a)\n",
    "        out = torch.empty_like(a)\n        side = torch.cuda.Stream()\n        side.wait_stream(torch.cuda.current_stream())\n"
).replace("        add_kernel[", "        with torch.cuda.stream(side):\n            add_kernel[").replace(
    "        return out", "        out.record_stream(side)\n        return out")


def show(r: EvalResult) -> str:
    return f"{r.status}: {r.reason}\n{r.log[-2000:]}"


@pytest.fixture(scope="module")
def workroot() -> Iterator[Path]:
    with enterable_tmpdir("kernopt-torch-gpu-") as d:
        yield d


@pytest.fixture(scope="module")
def ev(workroot: Path) -> Iterator[TorchEvaluator]:
    task = load_task(VECTOR_ADD)
    assert isinstance(task, TorchTask)
    task = task.model_copy(update={"timing": TorchTiming(reps=10, warmup=2)})
    e = TorchEvaluator(task, get_sandbox("local"), EvalConfig(), workroot / "ev")
    with e.session():
        assert e.device().cuda, "torch sees a GPU here, so the sandbox's Python must too"
    yield e
    e.close()


def test_end_to_end_with_timing(ev: TorchEvaluator) -> None:
    r = ev.evaluate(Candidate(files={"solution.py": FAST}))
    assert r.status == "ok", show(r)
    assert r.timing is not None and r.timing.device == torch.cuda.get_device_name(0)
    assert r.verification.device == r.timing.device and r.verification.timed_outputs_checked
    assert len(r.timing.candidate_s) >= 2 * 10 and r.timing.consistent
    assert r.timing.eager_median_s is not None and r.timing.compile_median_s is not None  # eager and torch.compile references
    assert r.timing.speedup_vs_eager is not None and "no_gpu_timing" not in r.flags
    base = ev.evaluate(Candidate(files={"solution.py": BASE}))
    assert base.status == "ok" and base.timing is not None and not base.faster, show(base)  # A/A: the baseline against itself


def test_side_stream_work_is_timed(ev: TorchEvaluator) -> None:
    r = ev.evaluate(Candidate(files={"solution.py": SIDE_STREAM}))
    if r.status == "rejected":  # the static gate may refuse streams outright; the runtime check is tested below
        assert "stream" in r.reason.lower(), show(r)
    else:
        assert r.status == "ok" and r.timing is not None, show(r)
        assert not r.faster and r.timing.speedup < 1.3, r.timing.describe()
    with ev.session():
        stats = ev.time(SIDE_STREAM, rounds=2)
    assert stats.candidate_median_s > 0.7 * stats.baseline_median_s, stats


def test_wrong_kernel_fails_on_gpu(ev: TorchEvaluator) -> None:
    r = ev.evaluate(Candidate(files={"solution.py": BASE.replace("mask = offs < n", "mask = offs < n - 1")}))
    assert r.status == "wrong_answer" and "seed" in r.reason, show(r)


def test_timing_plumbing_reports_device_events(ev: TorchEvaluator, workroot: Path) -> None:
    task = ev.task.model_copy(update={"shapes": Shapes(vars=["n"], check=[{"n": 7}], timing={"n": 1 << 20}),
                                      "timing": TorchTiming(reps=5, warmup=1, rotate=2, compare_compile=False)})
    tev = TorchEvaluator(task, ev.sandbox, EvalConfig(), workroot / "plumbing")
    try:
        with tev.session():
            stats = tev.time(FAST, rounds=2)
    finally:
        tev.close()
    assert stats.device != "cpu (Triton interpreter)" and stats.compile_median_s is None and stats.eager_median_s
    assert all(0 < t < 0.1 for t in stats.candidate_s)


CUDA_SOLUTION = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>
#define BLOCK 256
__global__ void add_kernel(const float* a, const float* b, float* out, int n) {
    int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}
torch::Tensor add(torch::Tensor a, torch::Tensor b) {
    auto out = torch::empty_like(a);
    int n = a.numel();
    add_kernel<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
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


def test_cuda_candidate_builds_once_and_runs(workroot: Path) -> None:
    d = workroot / "cuda_add"
    d.mkdir()
    (d / "reference.py").write_text((VECTOR_ADD / "reference.py").read_text())
    (d / "solution.py").write_text(CUDA_SOLUTION)
    (d / "task.toml").write_text('name = "cuda_add"\ntarget = "cuda"\ndescription = "a + b"\n'
                                 '[shapes]\nvars = ["n"]\ncheck = [{n = 1}, {n = 1000}]\ntiming = {n = 16777216}\n'
                                 '[timing]\nreps = 5\ncompare_compile = false\n')
    task = load_task(d)
    assert isinstance(task, TorchTask)
    e = TorchEvaluator(task, get_sandbox("local"), EvalConfig(rounds=2), workroot / "cuda")
    try:
        r = e.evaluate(Candidate(files={"solution.py": CUDA_SOLUTION}))
        assert r.status == "ok" and r.timing is not None, show(r)
        assert r.phase_s["build"] < task.build.timeout_s
        broken = CUDA_SOLUTION.replace("out[i] = a[i] + b[i];", "out[i] = a[i] + c[i];")
        r = e.evaluate(Candidate(files={"solution.py": broken}))
        assert r.status == "compile_error" and "error" in r.reason and "\n" not in r.reason, show(r)
    finally:
        e.close()
