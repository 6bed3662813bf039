"""What the torch family's build and timing steps need of the evaluator that runs them (build.py, timing.py
take a Host, not the evaluator, so neither imports it), and the device it probed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from kernopt.config import EvalConfig
from kernopt.evaluators.torch_family.compare import RunnerRun
from kernopt.sandbox import ExecResult
from kernopt.task import TorchTask

INTERPRETER = "cpu (Triton interpreter)"


@dataclass(frozen=True)
class Device:
    """What the sandbox's Python sees, probed once per evaluator."""

    cuda: bool
    name: str
    arch: str = ""
    l2_bytes: int = 0
    includes: tuple[str, ...] = ()  # torch's (and Python's) header directories, as the sandbox sees them

    @property
    def label(self) -> str:
        return self.name if self.cuda else INTERPRETER


class Host(Protocol):
    """The torch-family evaluator as its build and timing steps use it."""

    task: TorchTask
    config: EvalConfig

    def device(self) -> Device: ...
    def new_dir(self, label: str) -> Path: ...
    def run_step(self, cmd: list[str], cwd: Path, timeout: float, env: dict[str, str] | None = None,
                 memory_mb: int | None = -1) -> ExecResult: ...
    def run_role(self, role: str, mode: str, job: dict[str, Any], timeout: float, source: str | None = None,
                 ext: Path | None = None, carry: dict[str, Path] | None = None) -> tuple[RunnerRun, Path, ExecResult]: ...
    def check_run(self, run: RunnerRun, r: ExecResult, where: str, timeout: float,
                  status_on_error: str = "runtime_error") -> None: ...
    def cleanup(self, *dirs: Path | None) -> None: ...
    def baseline_extension(self) -> Path | None: ...
