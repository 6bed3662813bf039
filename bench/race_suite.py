#!/usr/bin/env python3
"""The race gate on the race suite (tests/race_suite): precision, recall and cost.

Each kernel is built the way the evaluator builds it (so the object decides whether it is checked)
and race-checked with the gate's exact code and configuration (kernopt.evaluators.c_family.race,
EvalConfig's race settings), `--repeat` times. Printed: each kernel's verdicts, then precision
(kernels called racy that are racy), recall (racy kernels called racy, per pass), how many ended
`unavailable`, and the cost: sanitizer builds, runs and seconds per candidate. Kernels the manifest
marks with a `construct` (ones the sanitizer cannot run) are reported apart, not scored.

`--matrix 2,3,4,8,16` explores instead: both builds (-O1, -O0) of every kernel run at each thread
count `--repeat` times, and the recall of single settings and of plans (sets of settings, one
pass each) is read off the same runs; this is how the gate's configuration was chosen.

usage: python bench/race_suite.py [--repeat 3] [--filter REGEX] [--sandbox local] [--json out.json]
       python bench/race_suite.py --matrix 2,3,4,8,16 [--repeat 3]
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import secrets
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kernopt.candidate import Candidate  # noqa: E402
from kernopt.config import EvalConfig  # noqa: E402
from kernopt.evaluators.base import EvalFail  # noqa: E402
from kernopt.evaluators.c_family import race  # noqa: E402
from kernopt.evaluators.c_family.evaluator import CFamilyEvaluator  # noqa: E402
from kernopt.sandbox import get_sandbox  # noqa: E402
from kernopt.sandbox.tree import remove_tree  # noqa: E402
from kernopt.task import load_task  # noqa: E402

SUITE = REPO / "tests" / "race_suite"


@dataclass
class Kernel:
    file: str
    racy: bool
    shape: str
    construct: str = ""  # a construct the sanitizer cannot run: expected `unavailable`, not scored

    @property
    def name(self) -> str:
        return self.file.removesuffix(".c")

    def source(self) -> str:
        return (SUITE / "kernels" / self.file).read_text()


def manifest(pattern: str | None = None) -> list[Kernel]:
    data = tomllib.loads((SUITE / "manifest.toml").read_text())
    kernels = [Kernel(**k) for k in data["kernel"]]
    return [k for k in kernels if pattern is None or re.search(pattern, k.name)]


class CountingEvaluator(CFamilyEvaluator):
    """The evaluator, counting the program runs it starts (the race check's sanitizer runs)."""

    runs = 0

    def run_driver(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        self.runs += 1
        return super().run_driver(*args, **kwargs)


@dataclass
class Outcome:
    verdicts: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    runs: list[int] = field(default_factory=list)


def nm_of(ev: CFamilyEvaluator, cand: Candidate) -> str:
    prog, _ = ev.build(cand)
    try:
        return (prog.parent / "nm.txt").read_text()
    finally:
        remove_tree(prog.parent)


def gate(ev: CountingEvaluator, kernels: list[Kernel], repeat: int, dynamic_only: bool = False) -> dict[str, Outcome]:
    """The race gate on every kernel, `repeat` times: race.check (static, then the sanitizer), or with
    `dynamic_only` the sanitizer's runs alone (race.dynamic), as the gate was before the static check."""
    out: dict[str, Outcome] = {}
    for rep in range(repeat):
        for k in kernels:
            o = out.setdefault(k.name, Outcome())
            cand = Candidate(files={ev.task.kernel: k.source()})
            try:
                nm = nm_of(ev, cand)
            except EvalFail as f:
                o.verdicts.append("build_failed")
                o.details.append(f.reason)
                continue
            ev.runs = 0
            t0 = time.monotonic()
            if dynamic_only:
                verdict, detail = race.dynamic(ev, cand, race.preprocess(ev, cand))
            else:
                verdict, detail = race.check(ev, cand, nm)
            o.seconds.append(time.monotonic() - t0)
            o.runs.append(ev.runs)
            o.verdicts.append(verdict)
            o.details.append(detail.splitlines()[0] if detail else "")
            mark = "ok " if (verdict == "race") == k.racy or k.construct else "XX "
            print(f"  [{rep + 1}/{repeat}] {mark}{k.name:<40} {verdict:<11} {o.seconds[-1]:5.1f}s {ev.runs} runs  "
                  f"{o.details[-1][:90]}", flush=True)
    return out


def score(kernels: list[Kernel], found: dict[str, list[bool]]) -> dict[str, float]:
    """Precision and recall over passes: found[name][i] says pass i called the kernel racy."""
    tp = sum(sum(found[k.name]) for k in kernels if k.racy)
    fp = sum(sum(found[k.name]) for k in kernels if not k.racy)
    passes = sum(len(found[k.name]) for k in kernels if k.racy)
    return {"precision": tp / (tp + fp) if tp + fp else 1.0, "recall": tp / passes if passes else 0.0,
            "false_positives": fp, "true_positives": tp, "racy_passes": passes}


def report_gate(kernels: list[Kernel], out: dict[str, Outcome], plan_of: list[tuple[str, list[int]]]) -> dict[str, Any]:
    # A kernel the object gate refuses never reaches the race check: reported, not scored.
    refused = [k for k in kernels if "build_failed" in out[k.name].verdicts]
    scored = [k for k in kernels if not k.construct and k not in refused]
    found = {k.name: [v == "race" for v in out[k.name].verdicts] for k in scored}
    s = score(scored, found)
    unavailable = sum(v == "unavailable" for k in scored for v in out[k.name].verdicts)
    verdicts = {(k.racy, v) for k in scored for v in out[k.name].verdicts}
    tally = {f"{'racy' if r else 'race-free'} {v}": sum(v2 == v for k in scored if k.racy == r for v2 in out[k.name].verdicts)
             for r, v in sorted(verdicts)}
    all_s = [x for k in scored for x in out[k.name].seconds]
    all_runs = [x for k in scored for x in out[k.name].runs]
    clean_s = [x for k in scored if not k.racy for x in out[k.name].seconds]
    clean_runs = [x for k in scored if not k.racy for x in out[k.name].runs]
    missed = sorted({k.name for k in scored if k.racy and not all(found[k.name])})
    flagged = sorted({k.name for k in scored if not k.racy and any(found[k.name])})
    racy = sum(k.racy for k in scored)
    # Race-free evaluations that only pass because reports on the runtime's own memory are not counted.
    filtered = sum("not counted" in d for k in scored if not k.racy for d in out[k.name].details)
    plan = "; ".join(f"{opt} at {', '.join(map(str, t))} threads" for opt, t in plan_of)
    print(f"\nconfiguration: {plan}; {race.TSAN_OPTIONS}; OMP_DYNAMIC=false")
    print(f"kernels: {len(scored)} scored ({racy} racy, {len(scored) - racy} race-free), "
          f"{sum(bool(k.construct) for k in kernels)} with constructs the sanitizer cannot run, {len(refused)} refused by the build")
    for k in refused:
        print(f"  not race-checked: {k.name} ({'racy' if k.racy else 'race-free'}): {out[k.name].details[0][:140]}")
    print(f"precision {s['precision']:.2f}  recall {s['recall']:.2f} ({s['true_positives']}/{s['racy_passes']} racy passes)  "
          f"false positives {s['false_positives']}  unavailable {unavailable}")
    print("verdicts: " + ", ".join(f"{k} {n}" for k, n in tally.items()))
    print(f"racy kernels that passed (clean): {tally.get('racy clean', 0)}")
    print(f"race-free evaluations with reports on memory the OpenMP runtime allocated (not counted): {filtered} of "
          f"{sum(len(out[k.name].verdicts) for k in scored if not k.racy)}")
    print(f"cost per candidate: {sum(all_runs) / len(all_runs):.2f} runs, {sum(all_s) / len(all_s):.1f} s "
          f"(race-free kernels, which run every setting: {sum(clean_runs) / max(len(clean_runs), 1):.2f} runs, "
          f"{sum(clean_s) / max(len(clean_s), 1):.1f} s)")
    if missed:
        print(f"missed (in some pass): {', '.join(missed)}")
    if flagged:
        print(f"false positives: {', '.join(flagged)}")
    for k in kernels:
        if k.construct:
            print(f"{k.construct}: {k.name}: {', '.join(out[k.name].verdicts)} — {out[k.name].details[0][:120]}")
    return {"config": {"plan": plan_of, "tsan_options": race.TSAN_OPTIONS},
            **s, "unavailable": unavailable, "verdicts": tally, "runtime_memory_filtered": filtered,
            "runs_per_candidate": sum(all_runs) / len(all_runs),
            "seconds_per_candidate": sum(all_s) / len(all_s), "missed": missed, "flagged": flagged,
            "refused_by_build": [k.name for k in refused],
            "kernels": {k.name: {"racy": k.racy, "shape": k.shape, "construct": k.construct, **out[k.name].__dict__} for k in kernels}}


def matrix(ev: CFamilyEvaluator, kernels: list[Kernel], threads: list[int], repeat: int) -> dict[str, Any]:
    """Every kernel's -O1 and -O0 sanitizer builds at each thread count, `repeat` times: found[kernel][setting][rep]."""
    found: dict[str, dict[str, list[bool]]] = {}
    for k in kernels:
        if k.construct:
            continue
        cand = Candidate(files={ev.task.kernel: k.source()})
        row = found.setdefault(k.name, {})
        t0 = time.monotonic()
        source = race.preprocess(ev, cand)
        for opt in ("-O1", "-O0"):
            with race.sanitizer_binary(ev, cand, opt, source) as prog:
                for t, _ in itertools.product(threads, range(repeat)):
                    j, _ = race.sanitizer_run(ev, prog, t, [secrets.randbits(62), secrets.randbits(62)], source)
                    row.setdefault(f"{opt}@{t}", []).append(bool(j.races))
        line = " ".join(f"{s}:{sum(v)}/{len(v)}" for s, v in row.items())
        print(f"  {'racy ' if k.racy else 'clean'} {k.name:<40} {line}  ({time.monotonic() - t0:.0f}s)", flush=True)
    scored = [k for k in kernels if not k.construct]
    settings = list(next(iter(found.values())))
    print("\nsingle settings (one run each):")
    for s in settings:
        sc = score(scored, {k.name: found[k.name][s] for k in scored})
        print(f"  {s:<8} precision {sc['precision']:.2f} recall {sc['recall']:.2f}")
    print("\nplans (each setting once per pass):")
    plans = [p for n in (1, 2, 3) for p in itertools.combinations(settings, n)]
    rows = []
    for p in plans:
        per = {k.name: [any(found[k.name][s][r] for s in p) for r in range(repeat)] for k in scored}
        sc = score(scored, per)
        rows.append((sc["recall"], -len(p), p, sc))
    for rec, _, p, sc in sorted(rows, reverse=True)[:25]:
        print(f"  {' + '.join(p):<28} runs {len(p)}  precision {sc['precision']:.2f} recall {rec:.2f}")
    return {"found": found}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=1, help="Passes over the suite (matrix: runs per setting).")
    ap.add_argument("--filter", help="Only kernels whose name matches this regular expression.")
    ap.add_argument("--sandbox", default="local", help="local | docker")
    ap.add_argument("--matrix", help="Explore: thread counts to run both builds at, e.g. 2,3,4,8,16.")
    ap.add_argument("--json", type=Path, help="Write the results here.")
    ap.add_argument("--dynamic-only", action="store_true", help="The sanitizer's runs alone, without the static check.")
    args = ap.parse_args()
    kernels = manifest(args.filter)
    task = load_task(SUITE / "task")
    cfg = EvalConfig()
    with tempfile.TemporaryDirectory(prefix="kernopt-race-suite-") as tmp:
        root = Path(tmp)
        root.chmod(0o755)
        ev = CountingEvaluator(task, get_sandbox(args.sandbox, task.target), cfg, root / "ev")
        try:
            with ev.session():
                if args.matrix:
                    result = matrix(ev, kernels, [int(t) for t in args.matrix.split(",")], args.repeat)
                else:
                    plan_of = race.race_plan(ev, Candidate(files={}))
                    result = report_gate(kernels, gate(ev, kernels, args.repeat, args.dynamic_only), plan_of)
        finally:
            ev.close()
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
