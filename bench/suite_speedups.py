#!/usr/bin/env python3
"""Optimize every built-in task with the offline tuner and print the verified speedups as a table.

Each task gets one `kernopt optimize` run (greedy search, the given candidate budget); the speedup
shown is the winner's re-measurement in a fresh sandbox, with its 95% bootstrap interval.

usage: python bench/suite_speedups.py [--budget 20] [--tasks tasks/openmp/gemm ...] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=int, default=20)
    ap.add_argument("--tasks", nargs="*", default=sorted(str(p.parent.relative_to(REPO)) for p in (REPO / "tasks").glob("*/*/task.toml")))
    ap.add_argument("--runs-dir", default=tempfile.mkdtemp(prefix="kernopt-suite-"))
    ap.add_argument("--sandbox", default="local", help="local (the figures in docs/results.md), docker or auto")
    args = ap.parse_args()
    print(f"tuner, greedy search, budget {args.budget} candidates per task; runs in {args.runs_dir}", flush=True)
    print("| task | best speedup | 95% CI | significant | candidates (statuses) | search time | best candidate's changes |")
    print("|---|---|---|---|---|---|---|", flush=True)
    logs = []
    for task in args.tasks:
        p = subprocess.run([sys.executable, "-m", "kernopt", "optimize", task, "--budget", str(args.budget),
                            "--sandbox", args.sandbox, "--runs-dir", args.runs_dir, "--json"], capture_output=True, text=True, cwd=REPO)
        if p.returncode != 0:
            print(f"| {task} | failed: {p.stderr.strip().splitlines()[-1:]} | | | | | |", flush=True)
            continue
        s = json.loads(p.stdout)
        logs.append(s)
        ci = s.get("best_ci")
        statuses = ", ".join(f"{k} {v}" for k, v in sorted(s["statuses"].items()))
        changes = "; ".join(s.get("best_lineage") or []) or "(none: baseline kept)"
        print(f"| {task.removeprefix('tasks/')} | {s['best_speedup']:.2f}x | {f'{ci[0]:.2f}-{ci[1]:.2f}' if ci else '-'} | "
              f"{'yes' if s.get('best_significant') else 'no'} | {s['candidates']} ({statuses}) | {s['elapsed_s']:.0f} s | {changes} |",
              flush=True)
    if logs:
        geo = math.exp(sum(math.log(s["best_speedup"]) for s in logs) / len(logs))
        print(f"\ngeometric-mean speedup over {len(logs)} tasks: {geo:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
