"""The work item: one task's optimization, the unit every executor (local pool, Ray) runs.

An executor gets WorkItems and gives back one WorkResult per item, plus ProgressEvents while the item
runs. `run_work_item` is the body every executor calls in its worker, so a task is optimized the same
way wherever it runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from kernopt.config import RunConfig


class Resources(BaseModel):
    """What one item needs of a worker: placement (Ray resource requests, local GPU assignment)."""

    model_config = ConfigDict(extra="forbid")

    cpus: float = Field(1.0, gt=0, description="CPU cores the item's timed runs use (threads x ranks).")
    gpus: float = Field(0.0, ge=0, description="GPUs (a GPU task gets one GPU of its own).")
    hardware: str | None = Field(None, description="A custom resource naming the hardware (Ray), e.g. 'h100'.")


class WorkItem(BaseModel):
    """One task to optimize inside a bench."""

    model_config = ConfigDict(extra="forbid")

    key: str = Field(description="Unique within the bench: the task's path under its suite's parent, e.g. 'openmp/gemm'.")
    config: RunConfig = Field(description="The resolved run config; config.task is the task directory.")
    run_dir: str = Field(description="The run directory this item writes (created, or resumed when half-finished).")
    resources: Resources = Resources()
    timeout_s: float | None = Field(None, gt=0, description="Wall clock for the whole item; a hung task is killed after it.")


ItemStatus = Literal["finished", "failed", "timeout", "crashed"]
# finished: the run wrote its summary (whatever it found). failed: the run stopped on an error (infra,
# a task that does not load). timeout: killed after timeout_s. crashed: the worker died (signal, OOM).


class WorkResult(BaseModel):
    """What became of one item. `summary` is the run's summary.json when it finished."""

    model_config = ConfigDict(extra="forbid")

    key: str
    status: ItemStatus
    run_dir: str
    summary: dict[str, Any] | None = None
    error: str = Field("", description="One line: why it failed, timed out or crashed.")
    elapsed_s: float = 0.0
    host: str = Field("", description="The machine it ran on.")


class ProgressEvent(BaseModel):
    """A worker's live report on its item (the bench display shows the latest one per item)."""

    model_config = ConfigDict(extra="forbid")

    key: str
    kind: Literal["start", "eval", "message"]
    done: int = Field(0, description="Candidates evaluated so far.")
    budget: int = 0
    best_speedup: float | None = None
    status: str = Field("", description="kind=eval: the last candidate's status.")
    text: str = ""
    host: str = ""


OnEvent = Callable[[ProgressEvent], None]
OnResult = Callable[[WorkResult], None]


class Executor(Protocol):
    """Runs items, calling on_event (any thread of the caller's process) and on_result once per item.
    Returns when every item has a result. A failing, hanging or crashing item yields a WorkResult with
    that status; it never stops the others."""

    name: str

    def run(self, items: Iterable[WorkItem], on_event: OnEvent, on_result: OnResult) -> None: ...

    def close(self) -> None: ...


def slug(key: str) -> str:
    """The run directory name for an item key ('openmp/gemm' -> 'openmp__gemm')."""
    return key.replace("/", "__")


def run_work_item(item: WorkItem, on_event: OnEvent) -> WorkResult:
    """Optimize one task in this process: create the run directory, or resume it when it is
    half-finished, or return its summary at once when it already finished. Never raises for a
    failing task: errors become a WorkResult with status 'failed'."""
    raise NotImplementedError  # implemented in this module by the bench-core work (docs/bench-design.md)
