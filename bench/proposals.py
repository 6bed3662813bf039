#!/usr/bin/env python3
"""The tuner's parallel-for proposals on each task's baseline, and whether the dependence analysis proves them.

For every task of the suites given (default tasks/openmp and tasks/loops): every pragma move the tuner offers on the
baseline (kernopt.tuner.pragmas.pragma_edits on the kernel with its macros expanded, as TunerPolicy reads it) that
adds or extends a `parallel for`, each checked against the dependence analysis (kernopt.tuner.pragmas.
dependence_verdicts): proven (the loop, and for collapse(2) the loop inside it, carries no dependence under the move's
clauses) or not. Also the loops the analysis proves parallel, the nests outside the model, and their reasons.

usage: python bench/proposals.py [--suites tasks/openmp tasks/loops] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernopt.errors import TaskError  # noqa: E402
from kernopt.task import load_task  # noqa: E402
from kernopt.tuner.cloops import analyze  # noqa: E402
from kernopt.tuner.cmacros import expand  # noqa: E402
from kernopt.tuner.deps import nests  # noqa: E402
from kernopt.tuner.pragmas import dependence_verdicts, pragma_edits  # noqa: E402

_WHERE = re.compile(r"the (\w+) loop \(line (\d+)\)")


def survey(task_dir: Path) -> dict[str, object] | None:
    try:
        task = load_task(task_dir)
    except TaskError:
        return None
    source = expand(task.baseline_source())
    loops = analyze(source)
    verdicts = dependence_verdicts(source, loops)
    by_key = {(lp.var, lp.line + 1): lp for lp in loops}
    moves = []
    for _, _, idea, _ in pragma_edits(source):
        if "parallel for" not in idea and "collapse" not in idea and "every nest" not in idea:
            continue
        where = _WHERE.findall(idea)
        proven = bool(where)
        for var, line in where:
            lp = by_key.get((var, int(line)))
            ok = lp is not None and verdicts.parallel.get(lp.index) is True
            if ok and lp is not None and "collapse" in idea:
                inner = [x for x in loops if x.parent == lp.index]
                ok = len(inner) == 1 and verdicts.parallel.get(inner[0].index) is True
            proven = proven and ok
        moves.append({"idea": idea, "proven": proven})
    unknown = [f"line {n.line + 1}: {n.reason}" for n in nests(source, assume_noalias=True, approximate=True) if not n.known]
    return {"task": f"{task_dir.parent.name}/{task_dir.name}", "moves": moves,
            "proven_loops": sum(1 for v in verdicts.parallel.values() if v), "unknown_nests": unknown}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suites", nargs="*", default=["tasks/openmp", "tasks/loops"])
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    rows = [r for suite in args.suites for d in sorted((ROOT / suite).glob("*/")) if (r := survey(d)) is not None]
    print(f"{'task':32} {'parallel moves':>14} {'unproven':>8} {'proven loops':>12}  outside the model")
    for r in rows:
        moves = r["moves"]
        assert isinstance(moves, list)
        unproven = sum(1 for m in moves if not m["proven"])
        unknown = r["unknown_nests"]
        assert isinstance(unknown, list)
        print(f"{r['task']:32} {len(moves):>14} {unproven:>8} {r['proven_loops']:>12}  {'; '.join(unknown)[:150]}")
    total = sum(len(r["moves"]) for r in rows)  # type: ignore[arg-type]
    bad = sum(1 for r in rows for m in r["moves"] if not m["proven"])  # type: ignore[attr-defined]
    none = [r["task"] for r in rows if not r["moves"]]
    print(f"\n{len(rows)} tasks, {total} parallel-for moves, {bad} unproven; no parallel move: {', '.join(none) or 'none'}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
