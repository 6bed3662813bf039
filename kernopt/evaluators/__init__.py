"""Evaluators: one per target family. `get_evaluator` picks one for a task."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from kernopt.candidate import Candidate
from kernopt.config import EvalConfig
from kernopt.evaluators.result import EvalResult
from kernopt.sandbox import Sandbox
from kernopt.task import AnyTask


class Evaluator(Protocol):
    """Judges candidates of one task: never raises for a candidate's fault, only for infrastructure."""

    def evaluate(self, candidate: Candidate) -> EvalResult: ...

    def remeasure(self, candidate: Candidate) -> EvalResult: ...

    def close(self) -> None: ...


class SessionMixin:
    """What every evaluator shares: `self._sb` is the sandbox its steps run in, the evaluation's session
    (docker: one container) inside `session()`, the evaluator's sandbox outside it."""

    sandbox: Sandbox
    workroot: Path
    _sb: Sandbox

    @contextlib.contextmanager
    def session(self) -> Iterator[None]:
        """One sandbox session (docker: one container) for everything one evaluation runs."""
        with self.sandbox.session(self.workroot) as sb:
            self._sb = sb
            try:
                yield
            finally:
                self._sb = self.sandbox


def static_check(task: AnyTask, candidate: Candidate) -> str | None:
    """The static gate for the task's family, as the evaluator applies it first: None, or why the candidate
    would be rejected before anything is built or run (one line)."""
    if task.family == "torch":
        from kernopt.evaluators.knobs import KnobError, apply_knobs
        from kernopt.evaluators.py_gate import check_python_source

        try:
            source = apply_knobs(candidate.files.get(task.kernel, ""), candidate.defines)
        except KnobError as e:
            return str(e)
        return check_python_source(task, source)  # type: ignore[arg-type]
    from kernopt.evaluators.static_gate import check_source

    return check_source(task, candidate)  # type: ignore[arg-type]


def get_evaluator(task: AnyTask, sandbox: Sandbox, config: EvalConfig, workroot: Path) -> Evaluator:
    if task.family == "torch":
        from kernopt.evaluators.torch_family import TorchEvaluator

        return TorchEvaluator(task, sandbox, config, workroot)  # type: ignore[arg-type]
    if task.target == "cuda-c":
        from kernopt.evaluators.cuda_c import CudaCEvaluator

        return CudaCEvaluator(task, sandbox, config, workroot)  # type: ignore[arg-type]
    from kernopt.evaluators.c_family import CFamilyEvaluator

    return CFamilyEvaluator(task, sandbox, config, workroot)  # type: ignore[arg-type]
