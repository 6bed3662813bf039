#!/usr/bin/env python3
"""Reward-to-go A/B: the tuner with and without the learned value model, on tasks the model never saw.

For every task and replicate, two runs of `kernopt optimize TASK --policy tuner --budget B --sandbox local`,
in alternating order (which arm goes first flips every replicate):

  off   the search as it is by default: the tuner's own prior orders its moves (search.value = none,
        4 proposals a step, all evaluated)
  on    the learned model picks which moves are tried: the tuner proposes its 8 best-ranked moves a step,
        the model scores them and the 4 it rates highest are evaluated, best first
        (--value learned, search.value_path = MODEL, search.batch = 8, search.keep = 4)

The tuner is deterministic: replicates differ only by the machine's timing noise (and what it makes
the search decide).

Read from each run's log (events.jsonl), the search's own decisions replayed (kernopt.agent.search.is_better):
  best@k      the speedup of the search's best after k evaluations (1.00 while there is none), k = 4 and B;
              a run at budget B evaluates the same first 4 candidates a budget-4 run would (the greedy
              search asks for the same proposals whatever the budget left, beyond the first step's cap
              when off: min(4, B) = 4)
  to 90%      the evaluations until the best first reached 90% of the task's reference: the highest
              best@B of any run of that task, either arm (">B" when it never did)
  claimed     the run's final claim (its best re-measured in fresh processes)

usage: python bench/rtg_ab.py --model rtg.json --tasks tasks/loops/gemm_ab ... [--budget 8] [--replicates 2]
                              --runs-dir DIR [--save ab.json] [--markdown]
       python bench/rtg_ab.py --runs-dir DIR --table-only        # the table from runs already in DIR
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kernopt.agent.search import is_better  # noqa: E402
from kernopt.candidate import Candidate  # noqa: E402
from kernopt.evaluators.result import EvalResult  # noqa: E402
from kernopt.runs import RunStore  # noqa: E402

ARMS = ("off", "on")


def arm_args(arm: str, model: Path) -> list[str]:
    if arm == "off":
        return []
    return ["--value", "learned", "--set", f"search.value_path={model}", "--set", "search.batch=8", "--set", "search.keep=4"]


def run_one(task: Path, arm: str, model: Path, budget: int, runs_dir: Path) -> Path:
    cmd = [sys.executable, "-m", "kernopt", "optimize", str(task), "--policy", "tuner", "--budget", str(budget),
           "--sandbox", "local", "--runs-dir", str(runs_dir / arm), "--json", *arm_args(arm, model)]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {p.stderr.strip().splitlines()[-1:]}")
    return Path(json.loads(p.stdout)["run_dir"])


def best_curve(run_dir: Path) -> list[float]:
    """The speedup of the search's best after each evaluation, the search's own decisions replayed."""
    best: tuple[Candidate, EvalResult] | None = None
    curve = []
    for ev in RunStore(run_dir).events():
        if ev.get("type") != "eval":
            continue
        cand, result = Candidate.model_validate(ev["candidate"]), EvalResult.model_validate(ev["result"])
        if is_better(result, best):
            best = (cand, result)
        curve.append(best[1].speedup if best is not None and best[1].speedup else 1.0)
    return curve


def describe(run_dir: Path, budget: int) -> dict:
    store = RunStore(run_dir)
    curve = best_curve(run_dir)
    full = curve + [curve[-1] if curve else 1.0] * (budget - len(curve))  # a search that stopped early keeps its best
    summary = store.finished_summary() or {}
    return {"run": str(run_dir), "task": Path(store.config().task).name, "evals": len(curve), "curve": full,
            "claimed": summary.get("best_speedup") or 1.0, "wrong": sum(1 for ev in store.events() if ev.get("type") == "eval"
                                                                        and ev["result"].get("status") == "wrong_answer")}


def table(runs: list[dict], budget: int) -> str:
    by_task: dict[str, list[dict]] = {}
    for r in runs:
        by_task.setdefault(r["task"], []).append(r)
    lines = [f"| task | arm | best@4 | best@{budget} | claimed | evaluations to 90% of the task's best |",
             "|---|---|---|---|---|---|"]
    agg: dict[str, dict[str, list[float]]] = {a: {"b4": [], "bb": [], "claim": [], "to90": []} for a in ARMS}
    for task, rs in sorted(by_task.items()):
        ref = max(r["curve"][budget - 1] for r in rs)
        for arm in ARMS:
            mine = [r for r in rs if r["arm"] == arm]
            if not mine:
                continue
            to90 = [next((k + 1 for k, v in enumerate(r["curve"]) if v >= 0.9 * ref), budget + 1) for r in mine]
            a = agg[arm]
            a["b4"] += [r["curve"][3] for r in mine]
            a["bb"] += [r["curve"][budget - 1] for r in mine]
            a["claim"] += [r["claimed"] for r in mine]
            a["to90"] += to90
            show = lambda xs: ", ".join(f"{x:.2f}x" for x in xs)  # noqa: E731
            lines.append(f"| {task} | {arm} | {show(r['curve'][3] for r in mine)} | {show(r['curve'][budget - 1] for r in mine)} | "
                         f"{show(r['claimed'] for r in mine)} | {', '.join(str(k) if k <= budget else f'>{budget}' for k in to90)} |")
    lines += ["", f"| arm | runs | geomean best@4 | geomean best@{budget} | geomean claimed | median evaluations to 90% | reached 90% |",
              "|---|---|---|---|---|---|---|"]
    for arm in ARMS:
        a = agg[arm]
        if not a["bb"]:
            continue
        gm = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs))  # noqa: E731
        reached = sum(1 for k in a["to90"] if k <= budget)
        med = sorted(a["to90"])[len(a["to90"]) // 2]
        lines.append(f"| {arm} | {len(a['bb'])} | {gm(a['b4']):.2f}x | {gm(a['bb']):.2f}x | {gm(a['claim']):.2f}x | "
                     f"{med if med <= budget else f'>{budget}'} | {reached} of {len(a['to90'])} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, help="the reward-to-go model (`kernopt rtg train` wrote it)")
    ap.add_argument("--tasks", nargs="*", type=Path, default=[])
    ap.add_argument("--budget", type=int, default=8)
    ap.add_argument("--replicates", type=int, default=2)
    ap.add_argument("--runs-dir", type=Path, required=True, help="runs go to DIR/off and DIR/on")
    ap.add_argument("--table-only", action="store_true", help="tabulate the runs already in --runs-dir")
    ap.add_argument("--save", type=Path)
    args = ap.parse_args()
    if not args.table_only:
        if args.model is None or not args.model.is_file() or not args.tasks:
            raise SystemExit("give --model (a file `kernopt rtg train` wrote) and --tasks, or --table-only")
        for task in args.tasks:
            for rep in range(args.replicates):
                for arm in (ARMS if rep % 2 == 0 else ARMS[::-1]):
                    t0 = time.monotonic()
                    run = run_one(task, arm, args.model.resolve(), args.budget, args.runs_dir.resolve())
                    d = describe(run, args.budget)
                    print(f"{task.name} rep {rep} {arm}: best@4 {d['curve'][3]:.2f}x best@{args.budget} "
                          f"{d['curve'][-1]:.2f}x claimed {d['claimed']:.2f}x ({time.monotonic() - t0:.0f} s)", flush=True)
    runs = []
    for arm in ARMS:
        for events in sorted((args.runs_dir / arm).glob("*/events.jsonl")):
            runs.append({**describe(events.parent, args.budget), "arm": arm})
    if args.save:
        args.save.write_text(json.dumps(runs, indent=1) + "\n")
    print(table(runs, args.budget))
    print(f"\nwrong answers: {sum(r['wrong'] for r in runs)} over {sum(r['evals'] for r in runs)} evaluations")


if __name__ == "__main__":
    main()
