"""Evaluators: one per target family. `get_evaluator` picks one for a task.

base.py holds what the families share; c_family/ is the C family (openmp, mpi, serial, cuda-c: the
trusted monitor and driver in c_family/c/, the static and object gates, the race check); torch_family/
is the torch family (Triton and CUDA-extension candidates of KernelBench-style tasks: the trusted
runner, the Python gate). result.py (EvalResult) and stats.py are shared by both."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from kernopt.candidate import Candidate
from kernopt.config import EvalConfig
from kernopt.evaluators.base import PhaseFn
from kernopt.evaluators.result import EvalResult, VerifiedBest
from kernopt.sandbox import Sandbox
from kernopt.task import AnyTask

if TYPE_CHECKING:
    from kernopt.hw.probe import HardwareProfile


class Evaluator(Protocol):
    """Judges candidates of one task: never raises for a candidate's fault, only for infrastructure.
    `on_phase`, when set, is told each phase of an evaluation as it starts (display only)."""

    on_phase: PhaseFn | None

    def evaluate(self, candidate: Candidate, best: VerifiedBest | None = None) -> EvalResult:
        """`best`: the search's verified best, for plausibility and the paired comparison (vs_best)."""

    def remeasure(self, candidate: Candidate) -> EvalResult: ...

    def how_built(self, candidate: Candidate) -> str | None: ...

    def close(self) -> None: ...


def static_check(task: AnyTask, candidate: Candidate) -> str | None:
    """The static gate for the task's family, as the evaluator applies it first: None, or why the candidate
    would be rejected before anything is built or run (one line)."""
    if task.family == "torch":
        from kernopt.evaluators.knobs import KnobError, apply_knobs
        from kernopt.evaluators.torch_family.py_gate import check_python_source

        try:
            source = apply_knobs(candidate.files.get(task.kernel, ""), candidate.defines)
        except KnobError as e:
            return str(e)
        return check_python_source(task, source)  # type: ignore[arg-type]
    from kernopt.evaluators.c_family.static_gate import check_source

    return check_source(task, candidate)  # type: ignore[arg-type]


def get_evaluator(task: AnyTask, sandbox: Sandbox, config: EvalConfig, workroot: Path, profile: HardwareProfile | None = None) -> Evaluator:
    """`profile`: the machine's roofs for CPU tasks' roofline figures (default: the cached one, if any)."""
    if task.family == "torch":
        from kernopt.evaluators.torch_family.evaluator import TorchEvaluator

        return TorchEvaluator(task, sandbox, config, workroot)  # type: ignore[arg-type]
    if task.target == "cuda-c":
        from kernopt.evaluators.c_family.cuda_c import CudaCEvaluator

        return CudaCEvaluator(task, sandbox, config, workroot)  # type: ignore[arg-type]
    from kernopt.evaluators.c_family.evaluator import CFamilyEvaluator

    return CFamilyEvaluator(task, sandbox, config, workroot, profile=profile)  # type: ignore[arg-type]
