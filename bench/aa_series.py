#!/usr/bin/env python3
"""Replay a long A/A timing series through the significance rule, in sliding windows.

Times a task's baseline against itself for many interleaved rounds (one process pair per round,
exactly as the evaluator does), then slides a window of R rounds along the series and applies the
evaluator's rule (TimingStats.significant) to each window, with the candidate's times divided by a
true speedup s. s = 1 counts false calls on real, time-correlated noise; s > 1 shows the power.
The series can be saved and replayed (--save / --load) so rules can be compared on the same data.

usage: python bench/aa_series.py tasks/mpi/dot [--rounds 60] [--windows 5 7] [--save series.json]
       python bench/aa_series.py --load series.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kernopt.evaluators import stats  # noqa: E402
from kernopt.evaluators.result import TimingStats  # noqa: E402

Groups = list[list[float]]


def record(task_dir: str, rounds: int) -> dict[str, Groups]:
    from kernopt.config import EvalConfig
    from kernopt.evaluators.c_family.evaluator import CFamilyEvaluator
    from kernopt.optimize import baseline_candidate
    from kernopt.sandbox import get_sandbox
    from kernopt.task import load_task

    task = load_task(task_dir)
    ev = CFamilyEvaluator(task, get_sandbox("local"), EvalConfig(early_stop_ratio=1e9), Path(tempfile.mkdtemp(prefix="kernopt-aas-")))
    try:
        base = baseline_candidate(task)
        prog, _ = ev.build(base)
        t = time.monotonic()
        ts = ev.time(base, ev.baseline_binary(), prog, rounds)
        print(f"recorded {rounds} rounds of {task.target}/{task.name} in {time.monotonic() - t:.0f} s", flush=True)
    finally:
        ev.close()
    reps = task.timing.reps
    split = lambda xs: [xs[i:i + reps] for i in range(0, len(xs), reps)]  # noqa: E731
    return {"task": f"{task.target}/{task.name}", "base": split(ts.baseline_s), "cand": split(ts.candidate_s)}  # type: ignore[dict-item]


def judge(base: Groups, cand: Groups) -> tuple[bool, float]:
    speedup, lo, hi = stats.ratio_of_medians(base, cand)
    t = TimingStats(baseline_s=[x for g in base for x in g], candidate_s=[x for g in cand for x in g],
                    baseline_median_s=stats.median(base), candidate_median_s=stats.median(cand), speedup=speedup,
                    ci_low=lo, ci_high=hi, p_value=stats.faster_p_value(base, cand), paired_low=stats.paired_lower_bound(base, cand))
    return t.significant, speedup


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("task", nargs="?")
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--windows", type=int, nargs="+", default=[5, 7])
    ap.add_argument("--speedups", type=float, nargs="+", default=[1.0, 1.2, 1.5, 2.0])
    ap.add_argument("--save")
    ap.add_argument("--load")
    args = ap.parse_args()
    if args.load:
        series = json.loads(Path(args.load).read_text())
    elif args.task:
        series = record(args.task, args.rounds)
        if args.save:
            Path(args.save).write_text(json.dumps(series))
    else:
        ap.error("give a task directory or --load")
    base, cand = series["base"], series["cand"]
    print(f"{series['task']}: {len(base)} rounds; windows slide by one round, so neighbouring windows share data")
    print(f"{'window':>6} {'true speedup':>12} {'windows':>7} {'called faster':>13} {'of those >1.05x':>15}")
    for w in args.windows:
        for s in args.speedups:
            hits = big = n = 0
            for i in range(len(base) - w + 1):
                ok, measured = judge(base[i:i + w], [[x / s for x in g] for g in cand[i:i + w]])
                n += 1
                hits += ok
                big += ok and measured > 1.05
            print(f"{w:>6} {s:>12.2f} {n:>7} {hits:>13} {big:>15}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
