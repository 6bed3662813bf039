"""The one bench loop: find the items, skip the finished ones, run the rest on an executor, record each
result in the commit log, and write the summaries.

Item discovery: a path is a task (a directory with task.toml) or a suite (every task directory below
it). An item's key is the task directory's path relative to the suite's parent directory
(tasks/openmp/gemm -> openmp/gemm); two items with one key are an error.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from kernopt.bench.store import BenchItemRef, BenchStore
from kernopt.bench.summary import COLUMNS, make_row, suite_figures
from kernopt.bench.work import Executor, OnEvent, OnResult, Resources, WorkItem, WorkResult, slug
from kernopt.errors import UserError
from kernopt.runs import RunStore


def discover(paths: list[Path], pattern: str | None = None) -> list[BenchItemRef]:
    """The items under `paths` (tasks or suites), sorted by key, filtered by `pattern` (a regex searched in the key)."""
    if not paths:
        raise UserError("give at least one task or suite directory (e.g. kernopt bench tasks/openmp)")
    try:
        regex = re.compile(pattern) if pattern else None
    except re.error as e:
        raise UserError(f"--filter {pattern!r}: not a valid regular expression: {e}") from None
    found: dict[str, BenchItemRef] = {}
    by_slug: dict[str, str] = {}
    for path in paths:
        if not path.exists():
            raise UserError(f"{path}: no such task or suite directory")
        if not path.is_dir():
            raise UserError(f"{path}: not a directory (give a task directory with task.toml, or a suite of them)")
        top = Path(os.path.abspath(path))
        if (top / "task.toml").is_file():
            dirs = [top]
        else:
            dirs = sorted({p.parent for p in top.rglob("task.toml")
                           if not any(part.startswith(".") for part in p.relative_to(top).parts)})
            dirs = [d for d in dirs if not _inside_task(d, top)]
            if not dirs:
                raise UserError(f"{path}: no task.toml in it or below it (a task is a directory with task.toml; see docs/tasks.md)")
        for d in dirs:
            key = d.relative_to(top.parent).as_posix()
            if key in found:
                raise UserError(f"two tasks with the key {key!r}: {found[key].task} and {d} (give them distinct suite directories)")
            if slug(key) in by_slug:
                raise UserError(f"tasks {by_slug[slug(key)]!r} and {key!r} would share the run directory {slug(key)}")
            found[key] = BenchItemRef(key=key, task=str(d.resolve()))
            by_slug[slug(key)] = key
    items = [found[k] for k in sorted(found) if regex is None or regex.search(k)]
    if not items:
        raise UserError(f"--filter {pattern!r} matches none of the {len(found)} tasks found")
    return items


def _inside_task(d: Path, top: Path) -> bool:
    """Whether a directory below a task directory (its data, not a task of the suite)."""
    return any((a / "task.toml").is_file() for a in d.parents if top in a.parents)


def default_name(paths: list[Path], policy: str) -> str:
    """A bench name from its suites and policy: tasks/openmp, tuner -> openmp-tuner."""
    parts = [Path(os.path.abspath(p)).name for p in paths]
    name = "+".join(dict.fromkeys(parts)) + f"-{policy}"
    name = re.sub(r"[^A-Za-z0-9_.+-]", "_", name)
    return name if len(name) <= 80 else name[:71] + "-" + hashlib.sha256(name.encode()).hexdigest()[:8]


def resources_for(task_dir: str, hardware: str | None = None) -> Resources:
    """What the item needs: the timed runs' cores (threads x ranks for the C family), one GPU for GPU
    tasks. A task that does not load gets the defaults (its worker reports why it does not load)."""
    from kernopt.task import Task, load_task

    try:
        task = load_task(task_dir)
    except UserError:
        return Resources(hardware=hardware)
    if not isinstance(task, Task):  # the torch family
        return Resources(cpus=1, gpus=1, hardware=hardware)
    threads = task.timing.threads if task.uses_openmp else 1
    ranks = task.timing.ranks if task.uses_mpi else 1
    return Resources(cpus=threads * ranks, gpus=1 if task.uses_gpu else 0, hardware=hardware)


class BenchOutcome(BaseModel):
    model_config = ConfigDict(extra="forbid")

    summary: dict[str, Any]
    summary_json: Path
    summary_csv: Path
    skipped: list[str]
    ran: list[str]

    @property
    def all_finished(self) -> bool:
        return all(row["status"] in ("faster", "no_speedup") for row in self.summary["tasks"])


def _host(run_dir: Path) -> str:
    try:
        return str(json.loads((run_dir / "meta.json").read_text()).get("host", ""))
    except (OSError, ValueError, AttributeError):
        return ""


def run_bench(store: BenchStore, executor: Executor, on_event: OnEvent, on_result: OnResult, *,
              timeout_s: float | None = None, hardware: str | None = None,
              on_skip: Callable[[WorkResult], None] | None = None) -> BenchOutcome:
    """Skip the finished items, run the rest, record every result, write summary.json and summary.csv."""
    started = time.monotonic()
    latest = store.latest()
    todo: list[WorkItem] = []
    skipped: list[str] = []
    for ref in store.meta.items:
        run_dir = store.run_dir(ref.key)
        done = RunStore(run_dir).finished_summary()
        if done is None:
            config = store.meta.run_config.model_copy(update={"task": ref.task, "runs_dir": store.runs_dir.resolve()})
            todo.append(WorkItem(key=ref.key, config=config, run_dir=str(run_dir.resolve()),
                                 resources=resources_for(ref.task, hardware), timeout_s=timeout_s))
            continue
        result = latest.get(ref.key)
        if result is None or result.status != "finished":  # finished, but killed before its result was recorded
            result = WorkResult(key=ref.key, status="finished", run_dir=str(run_dir.resolve()), summary=done,
                                elapsed_s=float(done.get("elapsed_s") or 0.0), host=_host(run_dir))
            store.append_result(result)
            latest[ref.key] = result
        skipped.append(ref.key)
        if on_skip is not None:
            on_skip(result)

    ran: list[str] = []

    def record(result: WorkResult) -> None:
        store.append_result(result)
        latest[result.key] = result
        ran.append(result.key)
        on_result(result)

    if todo:
        executor.run(todo, on_event, record)
    for item in todo:
        if item.key not in ran:  # an executor must give one result per item; if not, say so rather than drop it
            record(WorkResult(key=item.key, status="crashed", run_dir=item.run_dir, error="the executor returned no result"))

    rows = [make_row(ref.key, ref.task, latest[ref.key], store.run_dir(ref.key)) for ref in store.meta.items]
    suite = {**suite_figures(rows), "wall_s": round(time.monotonic() - started, 1)}
    summary = {"bench": json.loads(store.meta.model_dump_json(exclude={"items"})), "tasks": [r.model_dump() for r in rows],
               "suite": suite}
    json_path, csv_path = store.write_summary(summary, COLUMNS)
    return BenchOutcome(summary=summary, summary_json=json_path, summary_csv=csv_path, skipped=skipped, ran=ran)
