"""The run store: `runs/<run-id>/` with an append-only event log, candidates, best/ and summary.json.

events.jsonl is the source of truth: one JSON object per line, flushed and fsynced per event. A
killed run is resumed by replaying it: every candidate already evaluated is answered from the log,
so nothing is evaluated twice. A truncated last line (killed mid-write) is ignored.
"""

from __future__ import annotations

import fcntl
import json
import os
import platform
import secrets
import time
from pathlib import Path
from typing import Any

from kernopt import __version__
from kernopt.candidate import Candidate
from kernopt.config import RunConfig
from kernopt.errors import UserError
from kernopt.evaluators.result import EvalResult
from kernopt.hw import cpu_model
from kernopt.model import Completion, Spend


class RunStore:
    """One run directory, opened for writing by at most one process (an exclusive lock)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock_fd: int | None = None

    # ------------------------------------------------------------ opening
    @classmethod
    def create(cls, config: RunConfig, task_name: str, run_id: str | None = None) -> RunStore:
        """A new run directory under config.runs_dir, named run_id (a bench's items) or by time and task."""
        runs_dir = Path(config.runs_dir)
        try:
            runs_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UserError(f"cannot create runs directory {runs_dir}: {e.strerror}") from None
        run_id = run_id or f"{time.strftime('%Y%m%d-%H%M%S')}-{task_name}-{secrets.token_hex(2)}"
        store = cls(runs_dir / run_id)
        try:
            (store.root / "candidates").mkdir(parents=True)
        except OSError as e:  # an existing directory this user cannot write (/proc, a read-only mount)
            raise UserError(f"cannot create a run directory in {runs_dir}: {e.strerror}") from None
        store.lock()
        try:
            store._write_json("config.json", json.loads(config.model_dump_json()))
            store._write_json("meta.json", {
                "run_id": run_id, "kernopt": __version__, "python": platform.python_version(),
                "host": platform.node(), "machine": platform.machine(), "cpus": os.cpu_count(),
                "cpu_model": cpu_model(), "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            })
        except OSError as e:
            store.close()
            raise UserError(f"cannot write to run directory {store.root}: {e.strerror}") from None
        return store

    @classmethod
    def open(cls, ref: str | Path, runs_dir: Path = Path("runs")) -> RunStore:
        """Open an existing run by path or by id under runs_dir. Raises UserError with one line."""
        root = Path(ref)
        if not root.exists() and (runs_dir / str(ref)).exists():
            root = runs_dir / str(ref)
        if not root.exists():
            raise UserError(f"no run {ref!r} (looked for {root} and {runs_dir / str(ref)}); see `kernopt runs list`")
        if not root.is_dir() or not (root / "config.json").is_file():
            raise UserError(f"{root} is not a kernopt run directory (no config.json)")
        if not os.access(root, os.R_OK | os.X_OK) or not os.access(root / "config.json", os.R_OK):
            raise UserError(f"{root}: run directory is not readable")
        store = cls(root)
        store.config()  # fail now, in one line, rather than halfway through a command
        return store

    def lock(self) -> None:
        """Take the run's write lock; a second writer gets a clear error instead of a corrupted log."""
        self._lock_fd = lock_dir(self.root, "run", "is being written by another kernopt process")

    def close(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    # ------------------------------------------------------------ reading
    @property
    def run_id(self) -> str:
        return self.root.name

    def config(self) -> RunConfig:
        try:
            return RunConfig.model_validate_json((self.root / "config.json").read_text())
        except (OSError, ValueError) as e:
            raise UserError(f"{self.root}/config.json is unreadable or invalid: {str(e).splitlines()[0]}") from None

    def events(self) -> list[dict[str, Any]]:
        return json_lines(self.root / "events.jsonl")

    def evaluated(self) -> dict[str, tuple[Candidate, EvalResult]]:
        """Every candidate evaluated so far, by id, from the log."""
        done: dict[str, tuple[Candidate, EvalResult]] = {}
        for ev in self.events():
            if ev.get("type") == "eval":
                c = Candidate.model_validate(ev["candidate"])
                done[c.id] = (c, EvalResult.model_validate(ev["result"]))
        return done

    def spend(self) -> Spend:
        """What the run's model calls have cost so far, from the log (answers from the cache cost nothing)."""
        total = Spend()
        for ev in self.events():
            if ev.get("type") == "llm" and ev.get("completion"):
                total.add(Completion.model_validate(ev["completion"]))
        return total

    def remeasured(self, candidate_id: str) -> EvalResult | None:
        for ev in reversed(self.events()):
            if ev.get("type") == "remeasure" and ev["result"]["candidate_id"] == candidate_id:
                return EvalResult.model_validate(ev["result"])
        return None

    def summary(self) -> dict[str, Any] | None:
        try:
            return json.loads((self.root / "summary.json").read_text())
        except (OSError, json.JSONDecodeError):
            return None

    def finished_summary(self) -> dict[str, Any] | None:
        """summary.json when the run finished; None for a run killed, running, or never started."""
        s = self.summary()
        return s if isinstance(s, dict) and s.get("status") == "finished" else None

    # ------------------------------------------------------------ writing
    def append(self, type_: str, **fields: Any) -> None:
        """Append one event; flushed and fsynced so a kill loses at most the line being written."""
        append_line(self.root / "events.jsonl", json.dumps({"t": time.time(), "type": type_, **fields}))

    def record_eval(self, candidate: Candidate, result: EvalResult, log: str = "") -> None:
        """Files first, then the event: the event is the commit point."""
        d = self.root / "candidates" / candidate.id
        d.mkdir(parents=True, exist_ok=True)
        for name, text in candidate.files.items():
            (d / Path(name).name).write_text(text)
        self._write_json(f"candidates/{candidate.id}/candidate.json", candidate.model_dump(exclude={"files"}))
        self._write_json(f"candidates/{candidate.id}/eval.json", json.loads(result.model_dump_json()))
        if result.log:
            (d / "log.txt").write_text(result.log)
        self.append("eval", candidate=candidate.model_dump(), result=json.loads(result.model_dump_json()))

    def write_best(self, candidate: Candidate, result: EvalResult, build: str | None = None) -> None:
        """best/: the winner's files, candidate.json, eval.json and BUILD (how it was compiled and run, C family)."""
        d = self.root / "best"
        d.mkdir(exist_ok=True)
        for name, text in candidate.files.items():
            (d / Path(name).name).write_text(text)
        if build:
            (d / "BUILD").write_text(build)
        self._write_json("best/candidate.json", {**candidate.model_dump(exclude={"files"}), "id": candidate.id})
        self._write_json("best/eval.json", json.loads(result.model_dump_json()))

    def update_config(self, config: RunConfig, changed: dict[str, tuple[Any, Any]]) -> None:
        """A resume that extends the run's limits: the new config is saved (the log says what changed and when)."""
        self.append("config", changed={k: list(v) for k, v in changed.items()})
        self._write_json("config.json", json.loads(config.model_dump_json()))
        done = self.finished_summary()
        if done is not None:  # no longer finished: a kill during the extension leaves a run that --resume continues
            self.write_summary({**done, "status": "extending"})

    def write_summary(self, summary: dict[str, Any]) -> None:
        self._write_json("summary.json", summary)

    def _write_json(self, rel: str, obj: Any) -> None:
        """Atomic write (temp file + rename) so a reader never sees half a file."""
        path = self.root / rel
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, path)


# ---------------------------------------------------------------- logs and locks (runs and benches alike)
# The phases of an evaluation (EvalResult.phase_s) in the order they run; "wait" is time spent waiting for the host
# lock (placement.hold), "recheck" the second timing of an implausible or inconsistent result, "vs_best" the paired
# timing against the search's best (with the best's build), "last" the phase a failed evaluation ended in.
PHASES = ("wait", "build", "verify", "race", "time", "recheck", "vs_best", "last")


def phase_summary(results: list[EvalResult]) -> dict[str, dict[str, float]]:
    """Where the candidates' evaluation time went, per phase: the total seconds over the candidates, the median over
    the candidates that had the phase, and how many had it. Phases in PHASES order, any other after."""
    per: dict[str, list[float]] = {}
    for r in results:
        for name, s in r.phase_s.items():
            per.setdefault(name, []).append(s)
    order = [p for p in PHASES if p in per] + sorted(set(per) - set(PHASES))
    out: dict[str, dict[str, float]] = {}
    for name in order:
        xs = sorted(per[name])
        mid = len(xs) // 2
        out[name] = {"total_s": round(sum(xs), 3), "median_s": round(xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2, 3),
                     "candidates": len(xs)}
    return out


def append_line(path: Path, line: str) -> None:
    """Append one line to a log, flushed and fsynced; a torn last line left by a killed writer is ended first."""
    with open(path, "a+b") as f:
        f.seek(0, os.SEEK_END)
        if f.tell() > 0:
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":  # a torn line from a killed writer: end it so ours parses
                f.write(b"\n")
        f.write((line + "\n").encode())
        f.flush()
        os.fsync(f.fileno())


def json_lines(path: Path) -> list[Any]:
    """A log's JSON lines; a line torn by a killed writer is skipped. No file: no lines."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def lock_dir(root: Path, what: str, busy: str) -> int:
    """An exclusive, non-blocking lock on root/.lock (the kernel drops it when its holder dies);
    one-line UserErrors when the directory is unwritable or another process holds it."""
    try:
        fd = os.open(root / ".lock", os.O_CREAT | os.O_RDWR, 0o644)
    except OSError as e:
        raise UserError(f"{root}: cannot write to {what} directory: {e.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise UserError(f"{root} {busy}") from None
    return fd


def list_runs(runs_dir: Path) -> list[RunStore]:
    if not runs_dir.is_dir():
        return []
    return sorted((RunStore(p) for p in runs_dir.iterdir() if (p / "config.json").is_file()),
                  key=lambda s: s.root.name)

