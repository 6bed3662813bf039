"""The local executor: each item in a worker process of its own (`python -m kernopt.bench.worker`),
at most `jobs` at once, GPU items on GPUs of their own.

Workers start in sessions of their own, so a timeout signals the worker's whole process group: SIGTERM
first (the worker unwinds, and its sandbox kills the candidate processes it started), SIGKILL after a
grace period. Workers are spawned from the thread that calls `run` and ask the kernel for SIGTERM when
it dies (PR_SET_PDEATHSIG), so a killed bench leaves no worker behind. `on_event` and `on_result` are
called on the thread that calls `run`.
"""

from __future__ import annotations

import math
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import IO, Any

from kernopt.bench import worker
from kernopt.bench.work import OnEvent, OnResult, WorkItem, WorkResult
from kernopt.bench.worker import KILL_GRACE_S


def detect_gpus() -> list[str]:
    """The GPUs this machine lets us use: CUDA_VISIBLE_DEVICES when set, else the ones `nvidia-smi -L` lists."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [g.strip() for g in visible.split(",") if g.strip() and g.strip() != "-1"]
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        p = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if p.returncode != 0:
        return []
    return [str(i) for i, line in enumerate(ln for ln in p.stdout.splitlines() if ln.startswith("GPU "))]


class GpuPool:
    """Which GPUs are free. An item takes ceil(resources.gpus) of them, exclusively, until it ends."""

    def __init__(self, gpus: list[str]) -> None:
        self.all = list(gpus)
        self.free = list(gpus)

    def need(self, item: WorkItem) -> int:
        """GPUs the item will hold; 0 where this machine has none (GPU tasks then run without timing)."""
        return math.ceil(item.resources.gpus) if self.all else 0

    def take(self, n: int) -> list[str] | None:
        if n > len(self.free):
            return None
        got, self.free = self.free[:n], self.free[n:]
        return got

    def give(self, gpus: list[str]) -> None:
        self.free += [g for g in gpus if g not in self.free]


@dataclass
class _Running:
    item: WorkItem
    proc: subprocess.Popen[str]
    gpus: list[str]
    stderr: IO[bytes]
    deadline: float | None
    result: WorkResult | None = None
    timed_out: bool = False
    kill_at: float | None = None
    started: float = field(default_factory=time.monotonic)


class LocalExecutor:
    """Runs items as worker processes on this machine. See the module docstring."""

    name = "local"

    def __init__(self, jobs: int = 1, gpus: list[str] | None = None, kill_grace_s: float = KILL_GRACE_S) -> None:
        self.jobs = max(1, jobs)
        self.pool = GpuPool(detect_gpus() if gpus is None else gpus)
        self.kill_grace_s = kill_grace_s
        self._running: dict[str, _Running] = {}

    def run(self, items: Iterable[WorkItem], on_event: OnEvent, on_result: OnResult) -> None:
        pending = list(items)
        inbox: queue.Queue[tuple[str, str, Any]] = queue.Queue()
        try:
            while pending or self._running:
                self._start_what_fits(pending, inbox, on_result)
                try:
                    kind, key, payload = inbox.get(timeout=self._wait_s())
                except queue.Empty:
                    kind = ""
                if kind == "event":
                    on_event(payload)
                elif kind == "done":
                    run = self._running.pop(key)
                    self.pool.give(run.gpus)
                    on_result(self._outcome(run))
                self._enforce_timeouts()
        finally:
            self.close()

    def close(self) -> None:
        """Kill any worker still running (the bench was interrupted)."""
        for run in list(self._running.values()):
            worker.signal_group(run.proc, signal.SIGTERM)
        end = time.monotonic() + self.kill_grace_s
        for run in list(self._running.values()):
            try:
                run.proc.wait(timeout=max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                worker.signal_group(run.proc, signal.SIGKILL)
                run.proc.wait()
        self._running.clear()

    # ------------------------------------------------------------ scheduling
    def _start_what_fits(self, pending: list[WorkItem], inbox: queue.Queue[tuple[str, str, Any]], on_result: OnResult) -> None:
        i = 0
        while len(self._running) < self.jobs and i < len(pending):
            item = pending[i]
            need = self.pool.need(item)
            if need > len(self.pool.all):
                pending.pop(i)
                on_result(WorkResult(key=item.key, status="failed", run_dir=item.run_dir,
                                     error=f"needs {need} GPUs; this machine has {len(self.pool.all)}"))
                continue
            gpus = self.pool.take(need)
            if gpus is None:
                i += 1  # waits for a GPU; a later item may fit now
                continue
            pending.pop(i)
            self._running[item.key] = self._spawn(item, gpus, inbox)

    def _spawn(self, item: WorkItem, gpus: list[str], inbox: queue.Queue[tuple[str, str, Any]]) -> _Running:
        stderr = tempfile.TemporaryFile()
        proc = worker.spawn(item, stderr, env={"CUDA_VISIBLE_DEVICES": ",".join(gpus)} if gpus else None)
        deadline = time.monotonic() + item.timeout_s if item.timeout_s else None
        run = _Running(item=item, proc=proc, gpus=gpus, stderr=stderr, deadline=deadline)
        threading.Thread(target=self._read, args=(run, inbox), daemon=True, name=f"bench-{item.key}").start()
        return run

    @staticmethod
    def _read(run: _Running, inbox: queue.Queue[tuple[str, str, Any]]) -> None:
        """The worker's protocol lines until it exits: events to the inbox, the result kept."""
        worker.read_protocol(run.proc, lambda e: inbox.put(("event", run.item.key, e)), lambda r: setattr(run, "result", r))
        run.proc.wait()
        inbox.put(("done", run.item.key, None))

    def _wait_s(self) -> float:
        now, wait = time.monotonic(), 1.0
        for run in self._running.values():
            for t in (run.deadline, run.kill_at):
                if t is not None:
                    wait = min(wait, max(t - now, 0.0))
        return max(wait, 0.01)

    def _enforce_timeouts(self) -> None:
        now = time.monotonic()
        for run in self._running.values():
            if run.deadline is not None and now >= run.deadline and not run.timed_out:
                run.timed_out = True
                run.kill_at = now + self.kill_grace_s
                worker.signal_group(run.proc, signal.SIGTERM)
            elif run.kill_at is not None and now >= run.kill_at:
                run.kill_at = None
                worker.signal_group(run.proc, signal.SIGKILL)

    def _outcome(self, run: _Running) -> WorkResult:
        elapsed, host = round(time.monotonic() - run.started, 1), os.uname().nodename
        try:
            if run.timed_out:
                return worker.timed_out(run.item, elapsed, host)
            if run.result is not None:
                return run.result
            return worker.died(run.item, run.proc.returncode, run.stderr, elapsed, host)
        finally:
            run.stderr.close()
