"""The bench directory: bench.json (what the bench is), results.jsonl (the commit log), runs/<slug>/
(each item's run directory), summary.json + summary.csv, and .lock (one writer at a time).

A bench directory is reopened only with the configuration it was made with (run settings and item
keys); anything else is refused with one line naming the difference. results.jsonl is appended and
fsynced one WorkResult per line; a torn last line (a killed writer) is ignored; the latest line per
key wins.
"""

from __future__ import annotations

import csv
import json
import os
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kernopt import __version__
from kernopt.bench.work import WorkResult, slug
from kernopt.config import RunConfig
from kernopt.errors import UserError
from kernopt.runs import append_line, json_lines, lock_dir

# Run settings that say where things are, not what the bench does: they may differ between invocations.
NOT_COMPARED = {"task", "runs_dir"}


class BenchItemRef(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str
    task: str = Field(description="The task directory (absolute).")


class BenchMeta(BaseModel):
    """bench.json."""

    model_config = ConfigDict(extra="forbid")

    name: str
    created: str = Field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    kernopt: str = __version__
    executor: str = "local"
    jobs: int = 1
    filter: str | None = None
    run_config: RunConfig = Field(description="The template every item's run config is made from (task = '').")
    items: list[BenchItemRef]


class BenchStore:
    """One bench directory, opened for writing by at most one process."""

    def __init__(self, root: Path, meta: BenchMeta) -> None:
        self.root = root
        self.meta = meta
        self._lock_fd: int | None = None

    @classmethod
    def open(cls, root: Path, meta: BenchMeta) -> BenchStore:
        """Create the bench directory for `meta`, or reopen the one made with the same configuration
        (its bench.json is kept as it was). Takes the lock. One-line UserError otherwise."""
        try:
            root.mkdir(parents=True, exist_ok=True)
            (root / "runs").mkdir(exist_ok=True)
        except OSError as e:
            raise UserError(f"cannot create bench directory {root}: {e.strerror}") from None
        store = cls(root, meta)
        store._lock()
        try:
            if (root / "bench.json").exists():
                old = read_meta(root)
                diff = differences(old, meta)
                if diff:
                    raise UserError(f"{root} was made with a different configuration ({'; '.join(diff[:3])}"
                                    f"{'; ...' if len(diff) > 3 else ''}): run it with its own settings to resume it, "
                                    "or give --name for a new bench")
                store.meta = old
            else:
                store._write("bench.json", json.dumps(json.loads(meta.model_dump_json()), indent=2) + "\n")
        except BaseException:
            store.close()
            raise
        return store

    @classmethod
    def read(cls, root: Path) -> BenchStore:
        """An existing bench directory, for reading (no lock)."""
        return cls(root, read_meta(root))

    def _lock(self) -> None:
        self._lock_fd = lock_dir(self.root, "bench", "is being run by another kernopt process")

    def close(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    # ------------------------------------------------------------ paths
    @property
    def runs_dir(self) -> Path:
        return self.root / "runs"

    def run_dir(self, key: str) -> Path:
        return self.runs_dir / slug(key)

    # ------------------------------------------------------------ the commit log
    def append_result(self, result: WorkResult) -> None:
        """One line, flushed and fsynced; a torn line left by a killed writer is ended first."""
        append_line(self.root / "results.jsonl", result.model_dump_json())

    def results(self) -> list[WorkResult]:
        out = []
        for line in json_lines(self.root / "results.jsonl"):  # a line torn by a kill is skipped there
            try:
                out.append(WorkResult.model_validate(line))
            except ValidationError:
                continue
        return out

    def latest(self) -> dict[str, WorkResult]:
        """The latest result per key."""
        return {r.key: r for r in self.results()}

    # ------------------------------------------------------------ summaries
    def write_summary(self, summary: dict[str, Any], columns: list[str]) -> tuple[Path, Path]:
        """summary.json and summary.csv (the rows, in `columns` order; null as an empty cell)."""
        self._write("summary.json", json.dumps(summary, indent=2) + "\n")
        tmp = self.root / "summary.csv.tmp"
        with open(tmp, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(columns)
            for row in summary["tasks"]:
                w.writerow(["" if row[c] is None else row[c] for c in columns])
        os.replace(tmp, self.root / "summary.csv")
        return self.root / "summary.json", self.root / "summary.csv"

    def _write(self, name: str, text: str) -> None:
        tmp = self.root / (name + ".tmp")
        tmp.write_text(text)
        os.replace(tmp, self.root / name)


def read_meta(root: Path) -> BenchMeta:
    try:
        return BenchMeta.model_validate_json((root / "bench.json").read_text())
    except OSError as e:
        raise UserError(f"{root}/bench.json: cannot read: {e.strerror}") from None
    except ValidationError as e:
        raise UserError(f"{root}/bench.json is not a kernopt bench file: {str(e).splitlines()[0]}") from None


def _flat(obj: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out
    return {prefix.rstrip("."): obj}


def differences(old: BenchMeta, new: BenchMeta) -> list[str]:
    """What makes `new` a different bench from `old`: run settings (dotted keys) and item keys."""
    a = _flat(json.loads(old.run_config.model_dump_json()))
    b = _flat(json.loads(new.run_config.model_dump_json()))
    out = [f"{k}: {a.get(k)!r} there, {b.get(k)!r} now" for k in sorted(set(a) | set(b))
           if k not in NOT_COMPARED and a.get(k) != b.get(k)]
    old_keys, new_keys = {i.key for i in old.items}, {i.key for i in new.items}
    if new_keys - old_keys:
        out.append(f"tasks not in it: {', '.join(sorted(new_keys - old_keys)[:5])}")
    if old_keys - new_keys:
        out.append(f"tasks missing now: {', '.join(sorted(old_keys - new_keys)[:5])}")
    return out
