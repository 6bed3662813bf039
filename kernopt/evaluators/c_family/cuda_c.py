"""cuda-c: C-family tasks whose kernel is CUDA (`kernel.cu`: __global__ kernels plus a host launch
function taking device pointers) and whose task-owned harness is `harness.cu`.

Everything is built with nvcc: the trusted driver (driver.c, as C, with -DKO_CUDA: it uploads
inputs, poisons device outputs before every call, times the call plus a device synchronize and
downloads every buffer afterwards; see kernopt.h), the harness, and the kernel with `-Xptxas -v`,
whose per-kernel resource report goes into EvalResult.resources. The object gate allows nvcc's
registration machinery and nothing more (cuda_gate.py).

Whether a GPU is here is decided once per evaluator, by asking `nvidia-smi` in the sandbox. With one,
candidates are verified and timed exactly like other C-family candidates, compiled for the GPU's own
architecture. Without one, a candidate that passes the source gate, compiles, passes the object gate
and links is `unverified`: built and inspected, never run, never a speedup.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from kernopt.candidate import Candidate
from kernopt.config import EvalConfig
from kernopt.errors import ToolMissing
from kernopt.evaluators.base import Binary
from kernopt.evaluators.c_family.compare import DriverRun
from kernopt.evaluators.c_family.evaluator import CFamilyEvaluator, EvalFail
from kernopt.evaluators.c_family.nvcc import describe_resources, parse_ptxas
from kernopt.evaluators.c_family.static_gate import check_source
from kernopt.evaluators.result import EvalResult, KernelResources, Verification, VerifiedBest
from kernopt.sandbox import ExecResult, Sandbox
from kernopt.sandbox.tree import remove_tree
from kernopt.task import Task

NO_GPU = "none (compiled only)"
_PROBE = "nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader"


@dataclass(frozen=True)
class Gpu:
    name: str
    arch: str  # e.g. sm_90


def parse_gpu_query(text: str, task_arch: str = "") -> Gpu | None:
    """The first GPU of `nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader` output, or None.
    A task architecture with a suffix for this very GPU (sm_90a on a 9.0 device) is kept."""
    for line in text.splitlines():
        name, _, cap = line.rpartition(",")
        major, _, minor = cap.strip().partition(".")
        if name.strip() and major.isdigit() and minor.isdigit():
            arch = f"sm_{major}{minor}"
            return Gpu(name.strip(), task_arch if task_arch.rstrip("af") == arch else arch)
    return None


class CudaCEvaluator(CFamilyEvaluator):
    """The C-family evaluator for cuda-c tasks: nvcc builds, the CUDA object gate, ptxas resources,
    and `unverified` results where no GPU is present."""

    inspect_commands = "nm -P kernel.o > nm.txt && readelf -SW -rW kernel.o > sections.txt && objdump -dr kernel.o > disassembly.txt"
    link_flags = ["-Xlinker", "-z,relro,-z,now"]  # full RELRO through nvcc's host link

    def __init__(self, task: Task, sandbox: Sandbox, config: EvalConfig, workroot: Path) -> None:
        super().__init__(task, sandbox, config, workroot)  # the local sandbox: checks nvcc (task.compiler) and binutils
        if sandbox.name == "local" and shutil.which("gcc") is None:
            raise ToolMissing("gcc not found on PATH: nvcc needs it as its host compiler to evaluate cuda-c tasks")
        self._gpu: Gpu | None = None
        self._probed = False
        self._resources: list[KernelResources] = []

    # ---------------------------------------------------------------- the device
    def gpu(self) -> Gpu | None:
        """The GPU the sandbox runs on, or None; asked once per evaluator."""
        if not self._probed:
            self._probed = True
            if self.sandbox.name != "local" or shutil.which("nvidia-smi") is not None:
                d = self.new_dir("probe")
                try:
                    r = self.run_step(["sh", "-c", _PROBE], d, 60.0)
                finally:
                    remove_tree(d)
                self._gpu = parse_gpu_query(r.stdout, self.task.build.arch) if r.ok else None
        return self._gpu

    @property
    def arch(self) -> str:
        gpu = self.gpu()
        return gpu.arch if gpu else self.task.build.arch

    # ---------------------------------------------------------------- building
    def _base_flags(self) -> list[str]:
        return [*self.task.build.cflags, f"-arch={self.arch}", "-Xptxas", "-v"]

    def build(self, candidate: Candidate) -> tuple[Path, str]:
        self._resources = []
        prog, log = super().build(candidate)
        self._resources = parse_ptxas(log, self.arch)
        return prog, log

    def run_driver(self, b: Binary, sizes: list[int], seeds: list[int], timing: bool, timeout: float,
                   warmup: int = 0, reps: int = 0, extra_env: dict[str, str] | None = None,
                   memory_mb: int | None = -1, report: str | None = None) -> tuple[DriverRun, Path, ExecResult]:
        # The CUDA runtime reserves far more address space than it uses: no RLIMIT_AS for GPU programs.
        return super().run_driver(b, sizes, seeds, timing, timeout, warmup, reps, extra_env, memory_mb=None, report=report)

    # ---------------------------------------------------------------- evaluate
    def best_binary(self, best: VerifiedBest) -> Path:
        kept = self._resources  # the candidate's, not the best's
        try:
            return super().best_binary(best)
        finally:
            self._resources = kept

    def _evaluate(self, candidate: Candidate, best: VerifiedBest | None = None) -> EvalResult:
        self._resources = []
        gpu = self.gpu()
        if gpu is None:
            return self._compile_only(candidate)
        result = super()._evaluate(candidate, best)
        result.resources = list(self._resources)
        result.verification.device = gpu.name
        if result.timing is not None:
            result.timing.device = gpu.name
        return result

    def _compile_only(self, candidate: Candidate) -> EvalResult:
        t = time.monotonic()
        ver = Verification(device=NO_GPU)
        try:
            why = check_source(self.task, candidate)
            if why:
                raise EvalFail("rejected", why)
            prog, _log = self.build(candidate)
            if not self.config.keep_workdirs:
                remove_tree(prog.parent)
        except EvalFail as f:
            return EvalResult(candidate_id=candidate.id, status=f.status, reason=f.reason, log=f.log,  # type: ignore[arg-type]
                              verification=ver, phase_s={"build": time.monotonic() - t}, resources=self._resources)
        kernels = describe_resources(self._resources) or "no kernels reported"
        return EvalResult(candidate_id=candidate.id, status="unverified", verification=ver, resources=self._resources,
                          reason=f"compiled for {self.arch} with nvcc ({kernels}); no GPU here, so not run or timed",
                          phase_s={"build": time.monotonic() - t})

    def _remeasure(self, candidate: Candidate) -> EvalResult:
        gpu = self.gpu()
        if gpu is None:
            return EvalResult(candidate_id=candidate.id, status="unverified", verification=Verification(device=NO_GPU),
                              reason="re-measurement: no GPU here, so nothing can be timed")
        result = super()._remeasure(candidate)
        result.verification.device = gpu.name
        if result.timing is not None:
            result.timing.device = gpu.name
        return result
