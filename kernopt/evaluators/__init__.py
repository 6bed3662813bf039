"""Evaluators: one per target family. `get_evaluator` picks one for a task."""

from __future__ import annotations

import contextlib
import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from kernopt.candidate import Candidate
from kernopt.config import EvalConfig
from kernopt.errors import InfraError
from kernopt.evaluators.result import EvalResult
from kernopt.sandbox import ExecResult, Limits, Sandbox
from kernopt.task import AnyTask

if TYPE_CHECKING:
    from kernopt.hw.probe import HardwareProfile


class Evaluator(Protocol):
    """Judges candidates of one task: never raises for a candidate's fault, only for infrastructure."""

    def evaluate(self, candidate: Candidate) -> EvalResult: ...

    def remeasure(self, candidate: Candidate) -> EvalResult: ...

    def close(self) -> None: ...


class EvalFail(Exception):
    """Ends an evaluation early with a verdict (a status, one line of reason, a log excerpt)."""

    def __init__(self, status: str, reason: str, log: str = "") -> None:
        super().__init__(reason)
        self.status, self.reason, self.log = status, reason, log


def tail(text: str, lines: int = 25) -> str:
    """The last `lines` lines of a command's output."""
    return "\n".join(text.strip().splitlines()[-lines:])


def describe_exit(r: ExecResult) -> str:
    """How a sandboxed command ended: 'exited with code 3', 'killed by SIGKILL'."""
    if r.returncode is not None and r.returncode < 0:
        try:
            return f"killed by {signal.Signals(-r.returncode).name}"
        except ValueError:
            return f"killed by signal {-r.returncode}"
    return f"exited with code {r.returncode}"


class SandboxedEvaluator:
    """What every evaluator shares: `self._sb` is the sandbox its steps run in (the evaluation's session,
    docker: one container, inside `session()`; the evaluator's sandbox outside it), each step in a fresh
    directory under `workroot`."""

    sandbox: Sandbox
    workroot: Path
    config: EvalConfig
    _sb: Sandbox
    start_hint = ""  # appended to "sandbox could not start ..." (what the user can do about it)

    @contextlib.contextmanager
    def session(self) -> Iterator[None]:
        """One sandbox session (docker: one container) for everything one evaluation runs."""
        with self.sandbox.session(self.workroot) as sb:
            self._sb = sb
            try:
                yield
            finally:
                self._sb = self.sandbox

    def tool_dirs(self) -> list[str]:
        """Directories searched first for tools in local-sandbox steps (see tool_env)."""
        return []

    def tool_env(self) -> dict[str, str]:
        """What a local-sandbox step needs to find this machine's tools; nothing for other sandboxes (an
        image has its own). The evaluator looks tools up on this process's PATH (nvcc, gcc, ninja beside
        a venv's Python), so its steps search the same directories: a toolkit under /usr/local/cuda/bin
        or a driver found only through LD_LIBRARY_PATH would otherwise be missing in the sandbox alone."""
        if self.sandbox.name != "local":
            return {}
        from kernopt.sandbox.local import BASE_PATH

        dirs = [*self.tool_dirs(), *os.environ.get("PATH", "").split(os.pathsep), *BASE_PATH.split(os.pathsep)]
        env = {"PATH": os.pathsep.join(dict.fromkeys(d for d in dirs if os.path.isabs(d)))}
        libs = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if os.path.isabs(d)]
        if libs:
            env["LD_LIBRARY_PATH"] = os.pathsep.join(dict.fromkeys(libs))
        return env

    def _run(self, cmd: list[str], cwd: Path, timeout: float, env: dict[str, str] | None = None,
             memory_mb: int | None = -1) -> ExecResult:
        """One sandboxed step under the config's limits (memory_mb -1: the config's; None: no limit)."""
        limits = Limits(wall_s=timeout, memory_mb=self.config.memory_mb if memory_mb == -1 else memory_mb)
        r = self._sb.run(cmd, cwd, limits, {**self.tool_env(), **(env or {})})
        if r.returncode is None and not r.timed_out:
            raise InfraError(f"sandbox could not start {cmd[0]}: {r.stderr.strip()[:200]}{self.start_hint}")
        return r

    def _new_dir(self, label: str) -> Path:
        d = self.workroot / f"{label}-{uuid.uuid4().hex[:8]}"
        d.mkdir(parents=True)
        os.chmod(d, 0o755)
        return d


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


def get_evaluator(task: AnyTask, sandbox: Sandbox, config: EvalConfig, workroot: Path, profile: HardwareProfile | None = None) -> Evaluator:
    """`profile`: the machine's roofs for CPU tasks' roofline figures (default: the cached one, if any)."""
    if task.family == "torch":
        from kernopt.evaluators.torch_family import TorchEvaluator

        return TorchEvaluator(task, sandbox, config, workroot)  # type: ignore[arg-type]
    if task.target == "cuda-c":
        from kernopt.evaluators.cuda_c import CudaCEvaluator

        return CudaCEvaluator(task, sandbox, config, workroot)  # type: ignore[arg-type]
    from kernopt.evaluators.c_family import CFamilyEvaluator

    return CFamilyEvaluator(task, sandbox, config, workroot, profile=profile)  # type: ignore[arg-type]
