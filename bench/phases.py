#!/usr/bin/env python3
"""Where a candidate's evaluation time goes, per phase, from the runs in one or more directories (issue 28).

Each argument is LABEL=DIR: every run under DIR (DIR/*/events.jsonl) contributes its evaluated candidates'
`phase_s` (kernopt.runs.PHASES). One row per label: the candidates, their total time, the median of a
candidate's total time (on a suite whose candidates take 10 s or 40 s by task, the median falls in the gap:
read the total beside it), the median of each phase over the candidates (0 where a candidate did not have
it), and the sums of the guards that only some candidates pay (recheck, vs_best).

usage: python bench/phases.py before=DIR_A after=DIR_B
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kernopt.evaluators.result import EvalResult  # noqa: E402
from kernopt.runs import RunStore  # noqa: E402

SHOWN = ("wait", "build", "verify", "race", "time")
SUMMED = ("recheck", "vs_best")


def results(root: Path) -> list[EvalResult]:
    out = []
    for events in sorted(root.glob("*/events.jsonl")):
        for ev in RunStore(events.parent).events():
            if ev.get("type") == "eval" and ev.get("result"):
                out.append(EvalResult.model_validate(ev["result"]))
    return out


def row(label: str, rs: list[EvalResult]) -> str:
    def med(xs: list[float]) -> str:
        return f"{statistics.median(xs):.2f} s" if xs else "-"
    totals = [sum(r.phase_s.values()) for r in rs]
    cells = [label, str(len(rs)), f"{sum(totals):.0f} s", med(totals)]
    cells += [med([r.phase_s.get(p, 0.0) for r in rs]) for p in SHOWN]
    for p in SUMMED:
        paid = [r.phase_s[p] for r in rs if p in r.phase_s]
        cells.append(f"{sum(paid):.0f} s over {len(paid)}" if paid else "0")
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="+", help="LABEL=DIR")
    args = ap.parse_args()
    print("| code | candidates | total | median per candidate | " + " | ".join(SHOWN) + " | " + " | ".join(f"{p} (sum)" for p in SUMMED) + " |")
    print("|" + "---|" * (4 + len(SHOWN) + len(SUMMED)))
    for spec in args.dirs:
        label, _, d = spec.partition("=")
        if not d or not Path(d).is_dir():
            raise SystemExit(f"phases: error: {spec!r} is not LABEL=DIR with DIR a directory")
        print(row(label, results(Path(d))))


if __name__ == "__main__":
    main()
