"""The run's best is the first significant candidate (best first) whose re-measurement in a fresh sandbox holds up;
none holding up leaves the baseline (optimize.confirm_best)."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from kernopt.candidate import Candidate
from kernopt.config import RunConfig
from kernopt.evaluators.result import EvalResult, TimingStats
from kernopt.optimize import confirm_best
from kernopt.runs import RunStore
from kernopt.ui import print_summary


def result(c: Candidate, speedup: float, significant: bool, flags: list[str] | None = None, reason: str = "") -> EvalResult:
    lo = speedup * 0.95 if significant else min(speedup, 1.0) * 0.9
    timing = TimingStats(baseline_s=[1.0] * 5, candidate_s=[1 / speedup] * 5, baseline_median_s=1.0,
                         candidate_median_s=1 / speedup, speedup=speedup, ci_low=lo, ci_high=speedup * 1.05,
                         p_value=0.001 if significant else 0.4, paired_low=lo, machine_busy="machine_busy" in (flags or []))
    return EvalResult(candidate_id=c.id, status="ok", reason=reason or f"re-measured; {speedup:.2f}x", timing=timing,
                      flags=flags or [])


class Remeasurer:
    def __init__(self, figures: dict[str, tuple[float, bool, list[str]]]) -> None:
        self.figures, self.calls = figures, []

    def remeasure(self, c: Candidate) -> EvalResult:
        self.calls.append(c.id)
        speedup, significant, flags = self.figures[c.id]
        return result(c, speedup, significant, flags)


class Hooks:
    def __init__(self) -> None:
        self.messages: list[str] = []

    def on_message(self, text: str) -> None:
        self.messages.append(text)


def setup(tmp_path: Path, search: list[float]) -> tuple[RunStore, list[tuple[Candidate, EvalResult]]]:
    store = RunStore.create(RunConfig(task="tasks/openmp/gemm", runs_dir=tmp_path), "gemm")
    history = []
    for i, s in enumerate(search):
        c = Candidate(files={"kernel.c": f"/* {i} */"}, idea=f"idea {i}")
        history.append((c, result(c, s, significant=s > 1.0)))
    return store, history


def test_the_searchs_best_confirmed_is_the_best(tmp_path: Path) -> None:
    store, history = setup(tmp_path, [1.2, 2.0, 0.9])
    ev = Remeasurer({history[1][0].id: (1.9, True, [])})
    best, final, refuted = confirm_best(history[1], history, store, ev, Hooks())
    assert best == history[1] and final is not None and final.faster and refuted == [] and ev.calls == [history[1][0].id]


def test_a_refuted_best_gives_way_to_the_next_one_that_holds_up(tmp_path: Path) -> None:
    store, history = setup(tmp_path, [1.2, 1.24, 0.9, 1.5])
    a, b = history[3][0].id, history[1][0].id
    ev = Remeasurer({a: (0.39, False, []), b: (1.22, True, [])})
    hooks = Hooks()
    best, final, refuted = confirm_best(history[3], history, store, ev, hooks)
    assert ev.calls == [a, b]  # best first, then by the search's speedup; the 0.9x is never tried
    assert best == history[1] and final is not None and final.speedup == 1.22
    assert [r["candidate"] for r in refuted] == [a] and refuted[0]["remeasured_speedup"] == 0.39
    assert any("did not hold up" in m for m in hooks.messages)
    # a resumed run reuses the logged re-measurements instead of timing again
    again = Remeasurer({})
    assert confirm_best(history[3], history, RunStore.open(store.root), again, Hooks())[0] == history[1] and again.calls == []


def test_none_holding_up_leaves_the_baseline(tmp_path: Path) -> None:
    store, history = setup(tmp_path, [1.3, 1.24, 1.5, 1.4, 1.6])
    ev = Remeasurer({c.id: (0.8, False, []) for c, _ in history})
    best, final, refuted = confirm_best(history[4], history, store, ev, Hooks())
    assert best is None and final is None and len(refuted) == 3 == len(ev.calls)  # CONFIRM_TRIES
    buf = io.StringIO()
    print_summary(Console(file=buf, width=200), {"refuted": refuted, "candidates": 5, "statuses": {"ok": 5},
                                                 "elapsed_s": 1.0}, tmp_path)
    text = buf.getvalue()
    assert "best: the baseline: no candidate's speedup held up" in text and "1.60x in the search; 0.80x" in text


def test_a_machine_too_busy_to_tell_does_not_stop_the_next_one(tmp_path: Path) -> None:
    store, history = setup(tmp_path, [1.3, 1.5])
    # the best's re-measurement says machine_busy (which a candidate can earn by starving its own processes):
    # the runner-up still gets its re-measurement, and holds up
    ev = Remeasurer({history[1][0].id: (1.4, False, ["machine_busy"]), history[0][0].id: (1.3, True, [])})
    best, final, refuted = confirm_best(history[1], history, store, ev, Hooks())
    assert best == history[0] and final is not None and final.faster and refuted == []
    # none holding up: the busy one is the answer, its claim saying the machine was too busy
    store2, history2 = setup(tmp_path / "b", [1.3, 1.5])
    ev = Remeasurer({history2[1][0].id: (1.4, False, ["machine_busy"]), history2[0][0].id: (0.9, False, [])})
    best, final, refuted = confirm_best(history2[1], history2, store2, ev, Hooks())
    assert best == history2[1] and final is not None and final.flags == ["machine_busy"]
    assert [r["candidate"] for r in refuted] == [history2[0][0].id]


def test_refuted_candidates_are_listed_beside_a_confirmed_best(tmp_path: Path) -> None:
    s = {"best_candidate": "c2", "best_speedup": 1.9, "best_ci": [1.8, 2.0], "best_significant": True,
         "refuted": [{"candidate": "c1", "search_speedup": 2.4, "remeasured_speedup": 0.9, "reason": "re-measured; 0.90x"}],
         "candidates": 3, "statuses": {"ok": 3}, "elapsed_s": 1.0}
    buf = io.StringIO()
    print_summary(Console(file=buf, width=200), s, tmp_path)
    assert "not confirmed: c1, 2.40x in the search; 0.90x" in buf.getvalue()
