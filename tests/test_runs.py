"""The run store: append-only events, torn last lines, the write lock, candidate files."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernopt.candidate import Candidate
from kernopt.config import RunConfig
from kernopt.errors import UserError
from kernopt.evaluators.result import EvalResult
from kernopt.runs import RunStore, list_runs


def make(tmp_path: Path) -> RunStore:
    return RunStore.create(RunConfig(task="tasks/openmp/gemm", runs_dir=tmp_path), "gemm")


def test_record_and_read_back(tmp_path: Path) -> None:
    store = make(tmp_path)
    c = Candidate(files={"kernel.c": "void gemm(){}"}, idea="x", author="tuner")
    r = EvalResult(candidate_id=c.id, status="wrong_answer", reason="bad", log="details")
    store.record_eval(c, r)
    again = RunStore.open(store.root).evaluated()
    assert list(again) == [c.id] and again[c.id][1].reason == "bad"
    assert (store.root / "candidates" / c.id / "kernel.c").read_text() == "void gemm(){}"
    assert (store.root / "candidates" / c.id / "log.txt").read_text() == "details"
    assert (store.root / "meta.json").is_file() and (store.root / "config.json").is_file()


def test_torn_last_line_is_ignored_and_repaired(tmp_path: Path) -> None:
    store = make(tmp_path)
    c1 = Candidate(files={"kernel.c": "1"})
    store.record_eval(c1, EvalResult(candidate_id=c1.id, status="timeout"))
    with open(store.root / "events.jsonl", "a") as f:
        f.write('{"t": 1, "type": "eval", "candid')  # killed mid-write
    assert list(store.evaluated()) == [c1.id]
    c2 = Candidate(files={"kernel.c": "2"})
    store.record_eval(c2, EvalResult(candidate_id=c2.id, status="timeout"))
    assert list(store.evaluated()) == [c1.id, c2.id]


def test_second_writer_is_refused(tmp_path: Path) -> None:
    store = make(tmp_path)
    other = RunStore.open(store.root)
    with pytest.raises(UserError, match="being written by another kernopt process"):
        other.lock()
    store.close()
    other.lock()
    other.close()


def test_list_runs(tmp_path: Path) -> None:
    a, b = make(tmp_path), make(tmp_path)
    assert {s.run_id for s in list_runs(tmp_path)} == {a.run_id, b.run_id}
    assert list_runs(tmp_path / "nope") == []
