#!/usr/bin/env python3
"""A/A check: evaluate each task's own baseline as a candidate N times, under the full protocol.

A sound timing protocol must (almost) never call a program faster than itself. Prints, per task,
the spread of the measured "speedups", how often one was judged significant, and how often a
significant one exceeded 1.05x (the false-win figure), plus where an evaluation's time goes.

usage: python bench/aa_check.py [--repeats 20] [--tasks tasks/openmp/gemm tasks/mpi/dot ...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kernopt.config import EvalConfig  # noqa: E402
from kernopt.evaluators.c_family import CFamilyEvaluator  # noqa: E402
from kernopt.optimize import baseline_candidate  # noqa: E402
from kernopt.sandbox import get_sandbox  # noqa: E402
from kernopt.task import load_task  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--threshold", type=float, default=1.05)
    ap.add_argument("--tasks", nargs="*", default=sorted(str(p.parent) for p in (REPO / "tasks").glob("*/*/task.toml")))
    args = ap.parse_args()
    sandbox = get_sandbox("local")
    rows = []
    total_sig = total_false = total_n = 0
    print(f"A/A check: {args.repeats} evaluations of each baseline against itself, full protocol", flush=True)
    print(f"{'task':<22} {'n':>3} {'median':>7} {'min':>6} {'max':>6} {'signif':>6} {f'>{args.threshold:.2f}x':>6}"
          f" {'eval s':>7} {'build':>6} {'verify':>6} {'time':>6} {'in-kernel':>9}", flush=True)
    for path in args.tasks:
        task = load_task(path)
        ev = CFamilyEvaluator(task, sandbox, EvalConfig(), Path(tempfile.mkdtemp(prefix="kernopt-aa-")))
        base = baseline_candidate(task)
        speedups, sig, false_wins, walls, kernel_share = [], 0, 0, [], []
        phases: dict[str, list[float]] = {"build": [], "verify": [], "time": []}
        try:
            for _ in range(args.repeats):
                t0 = time.monotonic()
                r = ev.evaluate(base)
                walls.append(time.monotonic() - t0)
                if r.status != "ok" or r.timing is None:
                    print(f"  {task.name}: baseline evaluation failed: {r.status}: {r.reason}", flush=True)
                    continue
                speedups.append(r.timing.speedup)
                sig += r.faster
                false_wins += r.faster and r.timing.speedup > args.threshold
                for k in phases:
                    phases[k].append(r.phase_s.get(k, 0.0))
                kernel_share.append((sum(r.timing.baseline_s) + sum(r.timing.candidate_s)) / max(r.phase_s.get("time", 1e-9), 1e-9))
        finally:
            ev.close()
        if not speedups:
            continue
        total_sig += sig
        total_false += false_wins
        total_n += len(speedups)
        rows.append((task.name, speedups))
        print(f"{task.target + '/' + task.name:<22} {len(speedups):>3} {statistics.median(speedups):>7.3f} {min(speedups):>6.3f} "
              f"{max(speedups):>6.3f} {sig:>6} {false_wins:>6} {statistics.mean(walls):>7.1f} "
              f"{statistics.mean(phases['build']):>6.2f} {statistics.mean(phases['verify']):>6.2f} "
              f"{statistics.mean(phases['time']):>6.2f} {100 * statistics.mean(kernel_share):>8.0f}%", flush=True)
    if total_n:
        print(f"\noverall: {total_n} A/A evaluations, {total_sig} judged significantly faster "
              f"({100 * total_sig / total_n:.1f}%), {total_false} significant above {args.threshold:.2f}x "
              f"(false-win rate {100 * total_false / total_n:.2f}%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
