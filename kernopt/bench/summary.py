"""Per-task rows and suite figures of a bench (docs/bench-design.md defines every field).

A row comes from the item's latest WorkResult and its run directory's log; the suite figures come from
the rows alone, so they can be checked by hand.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from kernopt.bench.work import WorkResult
from kernopt.model import Completion, Spend
from kernopt.runs import json_lines

FAST_P = (1.0, 1.1, 1.5, 2.0)
RowStatus = Literal["faster", "no_speedup", "failed", "timeout", "crashed"]


class Row(BaseModel):
    """One task of a bench (summary.json "tasks", summary.csv; the columns in this order)."""

    model_config = ConfigDict(extra="forbid")

    key: str
    task: str
    status: RowStatus
    baseline_s: float | None = None
    best_speedup: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    significant: bool = False
    best_candidate: str | None = None
    candidates: int = 0
    verified_candidates: int = 0
    elapsed_s: float = 0.0
    usd: float = 0.0
    tokens: int = 0
    run_dir: str = ""
    error: str = ""
    calls: int = Field(0, exclude=True, description="Model calls (in the suite's spend, not a column).")


COLUMNS = [name for name, f in Row.model_fields.items() if not f.exclude]


def make_row(key: str, task: str, result: WorkResult, run_dir: Path) -> Row:
    """The row of one item: its result, and what its run directory's log says."""
    events = json_lines(run_dir / "events.jsonl")
    evals = [e["result"] for e in events if e.get("type") == "eval" and e.get("candidate", {}).get("author") != "baseline"]
    s = result.summary or {}
    row = Row(key=key, task=task, status="failed", run_dir=str(run_dir), error=result.error, elapsed_s=result.elapsed_s,
              candidates=len(evals), verified_candidates=sum(1 for r in evals if r.get("status") == "ok"))
    spend = Spend()  # as the run counts it: answers from its request cache cost nothing
    for e in events:
        if e.get("type") == "llm" and e.get("completion"):
            spend.add(Completion.model_validate(e["completion"]))
    row.usd, row.tokens, row.calls = round(spend.usd, 6), spend.tokens, spend.calls
    if result.status != "finished":
        row.status = result.status
    else:
        significant = bool(s.get("best_candidate")) and s.get("best_status") == "ok" and bool(s.get("best_significant"))
        ci = s.get("best_ci") or [None, None]
        row.status = "faster" if significant else "no_speedup"
        row.best_speedup = float(s.get("best_speedup", 1.0))
        row.ci_low, row.ci_high = ci[0], ci[1]
        row.significant = significant
        row.best_candidate = s.get("best_candidate")
    row.baseline_s = _baseline_s(events, row.best_candidate)
    return row


def _baseline_s(events: list[dict[str, Any]], best: str | None) -> float | None:
    """The baseline's median at the timing size: from the winner's re-measurement, else the median of
    the interleaved baselines of the timed candidates; None when nothing was timed."""
    for e in reversed(events):
        r = e.get("result") or {}
        if e.get("type") == "remeasure" and r.get("candidate_id") == best and r.get("timing"):
            return float(r["timing"]["baseline_median_s"])
    timed = [float(e["result"]["timing"]["baseline_median_s"]) for e in events
             if e.get("type") == "eval" and (e.get("result") or {}).get("timing")]
    return statistics.median(timed) if timed else None


def _wins(row: Row) -> bool:
    return row.status == "faster" and row.significant and row.best_speedup is not None


def suite_figures(rows: list[Row]) -> dict[str, Any]:
    """Correctness rate, fast_p, the geometric mean speedup, counts and spend over every row (failed
    rows included in every denominator)."""
    n = len(rows)
    fast_p = {f"{p:.1f}": round(sum(1 for r in rows if _wins(r) and (r.best_speedup or 0.0) > p) / n, 4) if n else None
              for p in FAST_P}
    logs = [math.log(r.best_speedup) if _wins(r) and r.best_speedup else 0.0 for r in rows]  # no win: 1.0
    return {
        "tasks": n,
        "finished": sum(1 for r in rows if r.status in ("faster", "no_speedup")),
        "correctness_rate": round(sum(1 for r in rows if r.verified_candidates > 0) / n, 4) if n else None,
        "fast_p": fast_p,
        "geomean_speedup": round(math.exp(sum(logs) / n), 4) if n else None,
        "candidates": sum(r.candidates for r in rows),
        "verified_candidates": sum(r.verified_candidates for r in rows),
        "spend": {"usd": round(sum(r.usd for r in rows), 6), "tokens": sum(r.tokens for r in rows), "calls": sum(r.calls for r in rows)},
        "elapsed_s": round(sum(r.elapsed_s for r in rows), 1),
    }
