"""Issue 19, a newcomer's first hour: status texts, candidate references, resume options, signals."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from kernopt.candidate import Candidate
from kernopt.evaluators.result import EvalResult, TimingStats


def timed(c: Candidate, speedup: float, lo: float, hi: float, significant: bool) -> EvalResult:
    t = TimingStats(baseline_s=[1.0] * 5, candidate_s=[1.0 / speedup] * 5, baseline_median_s=1.0, candidate_median_s=1.0 / speedup,
                    speedup=speedup, ci_low=lo, ci_high=hi, p_value=0.001 if significant else 0.5,
                    paired_low=lo if significant else None)
    return EvalResult(candidate_id=c.id, status="ok", reason="verified", timing=t)


def test_slower_verified_candidate_does_not_read_as_ok() -> None:
    from kernopt.ui import ProgressHooks

    buf = io.StringIO()
    hooks = ProgressHooks(Console(file=buf, width=200), 3)
    slow, same, fast = (Candidate(files={"kernel.c": str(i)}, idea=f"idea {i}") for i in range(3))
    hooks.on_eval_done(slow, timed(slow, 0.30, 0.29, 0.31, False), False, None)
    hooks.on_eval_done(same, timed(same, 1.02, 0.97, 1.06, False), False, None)
    hooks.on_eval_done(fast, timed(fast, 2.0, 1.9, 2.1, True), False, None)
    lines = buf.getvalue().splitlines()
    assert "ok (slower)" in lines[0] and "0.30x" in lines[0]
    assert "ok (not faster)" in lines[1] and "1.02x" in lines[1]
    assert f"{fast.id} ok " in lines[2] and "(" not in lines[2].split("2.00x")[0].split(fast.id)[1]


def test_summary_best_not_significant_says_so(tmp_path: Path) -> None:
    from kernopt.ui import print_summary

    buf = io.StringIO()
    s = {"best_candidate": "abc", "best_speedup": 0.9, "best_ci": [0.85, 0.95], "best_significant": False,
         "best_lineage": ["x"], "candidates": 1, "statuses": {"ok": 1}, "elapsed_s": 1.0}
    print_summary(Console(file=buf, width=200), s, tmp_path)
    assert "0.90x (slower)" in buf.getvalue()
    buf = io.StringIO()
    print_summary(Console(file=buf, width=200), {**s, "best_speedup": 3.0, "best_ci": [2.9, 3.1], "best_significant": True}, tmp_path)
    assert "3.00x (95% CI" in buf.getvalue()
