"""The work item: one task's optimization, the unit every executor (local pool, Ray) runs.

An executor gets WorkItems and gives back one WorkResult per item, plus ProgressEvents while the item
runs. `run_work_item` is the body every executor calls in its worker, so a task is optimized the same
way wherever it runs.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from kernopt.agent.search import Hooks
from kernopt.candidate import Candidate
from kernopt.config import RunConfig
from kernopt.errors import InfraError, UserError
from kernopt.evaluators.result import EvalResult


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
    kind: Literal["start", "eval", "message", "phase"]
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
    host = platform.node()
    started = time.monotonic()
    budget = item.config.search.max_candidates
    hooks = ItemHooks(item.key, budget, host, on_event)

    def result(status: ItemStatus, summary: dict[str, Any] | None = None, error: str = "") -> WorkResult:
        return WorkResult(key=item.key, status=status, run_dir=item.run_dir, summary=summary, error=error,
                          elapsed_s=round(time.monotonic() - started, 1), host=host)

    gpus = os.environ.get("CUDA_VISIBLE_DEVICES")
    on_event(ProgressEvent(key=item.key, kind="start", budget=budget, host=host, text=f"gpus {gpus}" if gpus is not None else ""))
    try:
        summary = _optimize(item, hooks)
    except (UserError, InfraError) as e:
        return result("failed", error=one_line(str(e)))
    except Exception as e:  # a bug or an unexpected failure in one task must not stop the bench
        return result("failed", error=one_line(f"{type(e).__name__}: {e}"))
    return result("finished", summary=summary)


def one_line(text: str, limit: int = 300) -> str:
    """The first non-empty line of an error, cut to `limit` characters."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "") or "unknown error"
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _optimize(item: WorkItem, hooks: Hooks) -> dict[str, Any]:
    """Create, resume or just read the item's run directory; the run's summary."""
    from kernopt.optimize import run_optimize
    from kernopt.runs import RunStore

    run_dir = Path(item.run_dir)
    if run_dir.is_dir() and not (run_dir / "config.json").is_file() and not (run_dir / "events.jsonl").exists():
        shutil.rmtree(run_dir)  # killed inside RunStore.create, before the config was written: nothing to keep
    if (run_dir / "config.json").is_file():
        store = RunStore.open(run_dir)
        store.lock()
        try:
            done = store.finished_summary()
            if done is not None:
                return done
            hooks.on_message(f"resuming {run_dir} ({len(store.evaluated())} candidates in its log)")
            return run_optimize(store, hooks, resumed=True)
        finally:
            store.close()
    from kernopt.sandbox import get_sandbox
    from kernopt.task import load_task

    task = load_task(item.config.task)
    sandbox = get_sandbox(item.config.sandbox, task.target)
    # As `kernopt optimize` records it: the sandbox used (not "auto") and where the task is.
    config = item.config.model_copy(update={"sandbox": sandbox.name, "task": str(task.root), "runs_dir": run_dir.parent})
    store = RunStore.create(config, task.name, run_id=run_dir.name)
    try:
        return run_optimize(store, hooks, sandbox=sandbox)
    finally:
        store.close()


class ItemHooks(Hooks):
    """Search progress as ProgressEvents for the bench display."""

    def __init__(self, key: str, budget: int, host: str, on_event: OnEvent) -> None:
        self.key, self.budget, self.host = key, budget, host
        self._send, self._lock = on_event, threading.Lock()
        self.done = 0

    def on_event(self, event: ProgressEvent) -> None:
        with self._lock:  # phases also come from the lock-wait thread: one protocol line at a time
            self._send(event)

    def on_phase(self, text: str) -> None:
        self.on_event(ProgressEvent(key=self.key, kind="phase", done=self.done, budget=self.budget, text=text, host=self.host))

    def on_eval_done(self, candidate: Candidate, result: EvalResult, cached: bool,
                     best: tuple[Candidate, EvalResult] | None) -> None:
        self.done += 1
        self.on_event(ProgressEvent(key=self.key, kind="eval", done=self.done, budget=self.budget,
                                    best_speedup=best[1].speedup if best is not None else None,
                                    status=result.status + (" (from log)" if cached else ""), host=self.host))

    def on_message(self, text: str) -> None:
        self.on_event(ProgressEvent(key=self.key, kind="message", done=self.done, budget=self.budget, text=text, host=self.host))


def encode(obj: BaseModel, kind: str) -> str:
    """One line of the worker protocol: {"event": ...} or {"result": ...}."""
    return json.dumps({kind: json.loads(obj.model_dump_json())})
