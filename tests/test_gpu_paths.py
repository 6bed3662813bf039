"""What the first run on a GPU machine (docs/gpu-results.md) found in the GPU code paths, caught here
without a GPU: the local sandbox's steps must find this machine's tools where the host found them (nvcc
under /usr/local/cuda/bin, ninja beside the venv's python, the driver through LD_LIBRARY_PATH); a cuda
task's starting kernel is built once per evaluator, not in every baseline timing process; a candidate
that works on a side stream may tell the allocator so (aten.record_stream is glue); `task check` judges a
cuda-c baseline's time per call by GPU standards."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kernopt.config import EvalConfig
from kernopt.errors import InfraError
from kernopt.evaluators.base import EvalFail, SandboxedEvaluator
from kernopt.evaluators.torch_family.compare import fallback_op
from kernopt.evaluators.torch_family.evaluator import TorchEvaluator
from kernopt.evaluators.torch_family.host import Device
from kernopt.sandbox import get_sandbox
from kernopt.task import Task, TorchTask, load_task
from kernopt.task_check import c_timing_check
from tests.conftest import REPO, SMALL_GEMM, enterable_tmpdir

RELU = REPO / "tasks" / "cuda" / "relu"
VECTOR_ADD = REPO / "tasks" / "triton" / "vector_add"
SAXPY = REPO / "tasks" / "cuda" / "saxpy"


@pytest.fixture
def workroot() -> Iterator[Path]:
    with enterable_tmpdir("kernopt-gpu-paths-") as d:
        yield d


class Steps(SandboxedEvaluator):
    def __init__(self, sandbox: Any, workroot: Path) -> None:
        self.sandbox = self._sb = sandbox
        self.config, self.workroot = EvalConfig(), workroot


def test_local_steps_find_tools_on_this_machines_path(workroot: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On the H100 machine nvcc was only in /usr/local/cuda/bin and ninja only in /opt/torch/.venv/bin: both on
    the orchestrator's PATH, neither on the sandbox's base PATH, so every cuda-c build and load_inline failed."""
    tools = workroot / "toolkit" / "bin"
    tools.mkdir(parents=True)
    for d in (workroot / "toolkit", tools):
        os.chmod(d, 0o755)
    tool = tools / "kernopt-fake-nvcc"
    tool.write_text("#!/bin/sh\necho fake nvcc ran\n")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH | stat.S_IRGRP | stat.S_IROTH)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("LD_LIBRARY_PATH", f"/opt/driver/lib64{os.pathsep}relative/lib{os.pathsep}/opt/driver/lib64")
    steps = Steps(get_sandbox("local"), workroot)
    env = steps.tool_env()
    assert env["PATH"].split(os.pathsep)[0] == str(tools) and "/usr/bin" in env["PATH"].split(os.pathsep)
    assert env["LD_LIBRARY_PATH"] == "/opt/driver/lib64"  # absolute directories only, once each
    d = steps.new_dir("step")
    r = steps.run_step(["sh", "-c", "kernopt-fake-nvcc && echo \"$LD_LIBRARY_PATH\""], d, 30.0)
    assert r.ok and r.stdout.split() == ["fake", "nvcc", "ran", "/opt/driver/lib64"], r


def test_a_container_gets_no_host_paths(workroot: Path) -> None:
    class Container:
        name = "docker"

    assert Steps(Container(), workroot).tool_env() == {}


def test_the_torch_runner_finds_tools_beside_its_python_first(workroot: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNOPT_TORCH_PYTHON", "/opt/some-venv/bin/python3")
    ev = TorchEvaluator(load_task(RELU), get_sandbox("local"), EvalConfig(), workroot / "ev")  # type: ignore[arg-type]
    assert ev.tool_env()["PATH"].split(os.pathsep)[0] == "/opt/some-venv/bin"


def _fake_gpu(ev: TorchEvaluator, monkeypatch: pytest.MonkeyPatch, workroot: Path) -> list[str]:
    built: list[str] = []

    def build(source: str) -> Path:
        built.append(source)
        out = workroot / f"ext{len(built)}" / "ext"
        out.mkdir(parents=True)
        return out

    monkeypatch.setattr(ev, "device", lambda: Device(True, "fake GPU", "sm_90"))
    monkeypatch.setattr(ev, "build_extension", build)
    return built


def test_a_cuda_tasks_starting_kernel_is_built_once_per_evaluator(workroot: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every baseline timing process used to build the starting kernel's extension itself with load_inline
    (about 40 s per process on the H100 machine, in the exclusive timing phase)."""
    task = load_task(RELU)
    assert isinstance(task, TorchTask)
    ev = TorchEvaluator(task, get_sandbox("local"), EvalConfig(), workroot / "ev")
    built = _fake_gpu(ev, monkeypatch, workroot)
    first = ev.baseline_extension()
    assert first is not None and ev.baseline_extension() == first and built == [task.baseline_source()]

    class Stop(Exception):
        pass

    roles: list[tuple[str, Path | None]] = []

    def run_role(role: str, mode: str, job: dict[str, Any], timeout: float, source: str | None = None, ext: Path | None = None,
                 carry: dict[str, Path] | None = None) -> Any:
        roles.append((role, ext))
        raise Stop

    monkeypatch.setattr(ev, "run_role", run_role)
    from kernopt.evaluators.torch_family.timing import time_rounds

    with pytest.raises(Stop):
        time_rounds(ev, task.baseline_source(), 2, ext=workroot / "candidate-ext")
    assert roles == [("baseline", first)] and len(built) == 1


def test_no_prebuilt_baseline_for_triton_or_without_a_gpu(workroot: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    triton = TorchEvaluator(load_task(VECTOR_ADD), get_sandbox("local"), EvalConfig(), workroot / "t")  # type: ignore[arg-type]
    assert not _fake_gpu(triton, monkeypatch, workroot) and triton.baseline_extension() is None
    cpu = TorchEvaluator(load_task(RELU), get_sandbox("local"), EvalConfig(), workroot / "c")  # type: ignore[arg-type]
    monkeypatch.setattr(cpu, "device", lambda: Device(False, "cpu"))
    assert cpu.baseline_extension() is None


def test_a_starting_kernel_that_does_not_build_is_an_infrastructure_error(workroot: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ev = TorchEvaluator(load_task(RELU), get_sandbox("local"), EvalConfig(), workroot / "ev")  # type: ignore[arg-type]
    _fake_gpu(ev, monkeypatch, workroot)

    def fail(source: str) -> Path:
        raise EvalFail("compile_error", "the extension does not build: main.cu(3): error")

    monkeypatch.setattr(ev, "build_extension", fail)
    with pytest.raises(InfraError, match="solution.py does not build"):
        ev.baseline_extension()


def test_record_stream_is_allocator_glue() -> None:
    """A candidate on a side stream calls out.record_stream(side): on the H100 the runtime trace rejected
    the side-stream hack for it ("computes with the torch op aten.record_stream") before timing ever ran."""
    assert fallback_op({"aten.record_stream", "aten.empty_like"}, {"aten.add"}, []) is None
    assert fallback_op({"aten.record_stream", "aten.add"}, {"aten.add"}, []) == ("aten.add", True)


@pytest.mark.parametrize(("seconds", "ok", "warning"), [(55e-3, True, False), (0.1e-3, True, False), (20e-6, False, True),
                                                        (2e-6, False, False)])
def test_task_check_times_a_cuda_c_baseline_by_gpu_standards(seconds: float, ok: bool, warning: bool) -> None:
    """The H100 run: naive cuda-c baselines take 0.1 ms (stencil2d) to 56 ms (saxpy) per call; the CPU rule
    (0.2-2 s, an error below 1 ms) failed two of them and warned on the rest."""
    task = load_task(SAXPY)
    assert isinstance(task, Task) and task.uses_gpu
    c = c_timing_check(task, seconds)
    assert (c.ok, c.warning) == (ok, warning), c


@pytest.mark.parametrize(("seconds", "ok", "warning"), [(0.5, True, False), (0.05, False, True), (0.1e-3, False, False)])
def test_task_check_keeps_the_cpu_band_for_cpu_tasks(seconds: float, ok: bool, warning: bool) -> None:
    task = load_task(SMALL_GEMM)
    assert isinstance(task, Task) and not task.uses_gpu
    c = c_timing_check(task, seconds)
    assert (c.ok, c.warning) == (ok, warning), c


def test_a_c_family_remeasurement_carries_the_review_flags(small_task: Path, workroot: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The summary reports the re-measurement's flags: saxpy's 485x on the H100 (a 1-block starting kernel)
    came without implausible_speedup, which only evaluate() used to set."""
    from kernopt.candidate import Candidate
    from kernopt.evaluators.c_family.evaluator import CFamilyEvaluator
    from kernopt.evaluators.result import TimingStats

    task = load_task(small_task)
    assert isinstance(task, Task)
    ev = CFamilyEvaluator(task, get_sandbox("local"), EvalConfig(), workroot / "c")
    fake = TimingStats(baseline_s=[1.0] * 5, candidate_s=[0.002] * 5, baseline_median_s=1.0, candidate_median_s=0.002, speedup=500.0,
                       ci_low=400.0, ci_high=600.0, p_value=0.004, paired_low=300.0, consistent=False)
    monkeypatch.setattr(ev, "time", lambda *args, **kwargs: fake)
    try:
        r = ev.remeasure(Candidate(files={task.kernel: task.baseline_source()}))
    finally:
        ev.close()
    assert r.status == "ok" and r.flags == ["implausible_speedup", "timing_inconsistent"], r
