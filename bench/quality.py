#!/usr/bin/env python3
"""Measurement quality: the A/A false-win rate, the spread of repeated timings, and the evaluator's overhead.

(a) A/A false wins. Each task's baseline is evaluated as a candidate against itself (the same source
    plus a comment, so a different candidate id) `--repeats` times under the full protocol (build,
    verification sweep, race check, interleaved timing) with the evaluator's default settings. A false
    win is an evaluation the evaluator's rule calls significantly faster (TimingStats.significant) AND
    whose speedup is at least `--threshold` (1.05x). Printed: the count and the rate with its 95%
    Clopper-Pearson interval. The acceptance is a rate of at most 1%; note that with no false win at
    all, the interval's upper end only reaches 1% from 368 evaluations on.
(b) Spread of one kernel's timings. The baseline alone, timed in `--cv-rounds` processes of `--cv-reps`
    timed calls each (after the task's warm-up calls): the coefficient of variation (stdev/mean) within
    a process (the median over processes) and across processes (of the per-process medians, which is
    what the evaluator's statistics work on).
(c) Evaluator overhead, from the A/A evaluations of (a): the share of an evaluation's wall time that is
    not the compiled program's timed calls (build, verification, race check, process starts, warm-up
    calls, input generation and output checks, the sandbox), with the per-phase means (phase_s), and
    the same share with the warm-up calls (estimated from the median call) counted as kernel time. Time
    spent waiting for the host lock (other evaluations timing) is shown apart and left out of the share.
    A serial baseline has no OpenMP constructs, so its race check is skipped: a parallel candidate's
    evaluation also pays the race check (two ThreadSanitizer builds and three runs, about 1 s).

(d) The monitor protocol's cost per call (docs/verification.md): an empty kernel (the task's signature
    with an empty body) timed by the monitor at the timing size is the protocol's own time inside a
    timed window (the go command, the done answer, the resume); its share of the baseline's median call
    is the bias the protocol adds to a measurement. Outside the windows, per call: the process wall time
    less the calls, over the calls (the harness's fill, the stops, the input hashes, the output copy).

usage: python bench/quality.py [--tasks tasks/openmp/gemm ...] [--repeats 25] [--parts aa cv overhead protocol] [--markdown]
(bench/aa_check.py runs parts aa and overhead, as it did before this script existed.)
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from peers import DOC, machine, time_interleaved, update_markdown  # noqa: E402

from kernopt.candidate import Candidate  # noqa: E402
from kernopt.config import EvalConfig  # noqa: E402
from kernopt.evaluators.base import Binary  # noqa: E402
from kernopt.evaluators.c_family.evaluator import CFamilyEvaluator  # noqa: E402
from kernopt.evaluators.result import EvalResult  # noqa: E402
from kernopt.sandbox import get_sandbox  # noqa: E402
from kernopt.task import Task, load_task  # noqa: E402

DEFAULT_TASKS = ["tasks/openmp/gemm", "tasks/openmp/jacobi2d", "tasks/openmp/reduction", "tasks/openmp/spmv_csr"]
PHASES = ("build", "verify", "race", "time")


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Exact two-sided binomial interval for k successes in n trials."""
    from scipy.stats import beta

    if n <= 0 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n and n > 0 (k={k}, n={n})")
    a = (1 - confidence) / 2
    lo = 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - a, k + 1, n - k))
    return lo, hi


def zero_fail_n(rate: float, confidence: float = 0.95) -> int:
    """The fewest trials for which no success at all puts the Clopper-Pearson upper end at or below `rate`."""
    return math.ceil(math.log((1 - confidence) / 2) / math.log(1 - rate))


def cv(xs: list[float]) -> float:
    """Coefficient of variation (sample stdev over mean); 0 for fewer than two values."""
    return statistics.stdev(xs) / statistics.mean(xs) if len(xs) > 1 else 0.0


def aa_candidate(task: Task, i: int) -> Candidate:
    """The baseline, behaving identically, under a candidate id of its own."""
    return Candidate(files={task.kernel: task.baseline_source() + f"\n/* A/A evaluation {i} */\n"}, author="aa", idea=f"A/A {i}")


@dataclass
class Overhead:
    """Per evaluation: wall seconds, lock wait, phase seconds, seconds inside the timed calls."""

    wall: list[float] = field(default_factory=list)
    wait: list[float] = field(default_factory=list)
    timed: list[float] = field(default_factory=list)
    warmup: list[float] = field(default_factory=list)  # estimated: warm-up calls per process x processes x median call
    phases: dict[str, list[float]] = field(default_factory=lambda: {p: [] for p in PHASES})

    def add(self, wall: float, r: EvalResult, reps: int, warmup: int) -> None:
        t = r.timing
        assert t is not None
        self.wall.append(wall)
        self.wait.append(r.phase_s.get("wait", 0.0))
        self.timed.append(sum(t.baseline_s) + sum(t.candidate_s))
        self.warmup.append(warmup * (len(t.baseline_s) * t.baseline_median_s + len(t.candidate_s) * t.candidate_median_s) / reps)
        for p in PHASES:
            self.phases[p].append(r.phase_s.get(p, 0.0))

    def share(self, count_warmup: bool = True) -> float:
        """Share of the (lock-wait-free) evaluation wall time outside the timed calls (and, with
        count_warmup=False, outside the estimated warm-up calls too), over all evaluations."""
        busy = sum(w - q for w, q in zip(self.wall, self.wait, strict=True))
        kernel = sum(self.timed) + (0.0 if count_warmup else sum(self.warmup))
        return 1 - kernel / busy if busy > 0 else 0.0


@dataclass
class TaskQuality:
    name: str
    speedups: list[float] = field(default_factory=list)
    significant: int = 0
    false_wins: int = 0
    busy: int = 0  # machine_busy verdicts (never significant: a busy run must not pass for a quiet one)
    reruns: int = 0  # timing rounds re-run because the machine disturbed them
    failures: list[str] = field(default_factory=list)
    overhead: Overhead = field(default_factory=Overhead)
    cv_within: float | None = None
    cv_across: float | None = None
    cv_median_s: float | None = None
    load: list[float] = field(default_factory=list)  # the 1-minute load average after each A/A evaluation
    protocol: dict[str, float] = field(default_factory=dict)  # part (d): seconds per call


def measure(task_dir: str, args: argparse.Namespace) -> TaskQuality:
    task = load_task(task_dir)
    q = TaskQuality(f"{task.target}/{task.name}")
    ev = CFamilyEvaluator(task, get_sandbox("local"), EvalConfig(), Path(tempfile.mkdtemp(prefix="kernopt-quality-")))
    try:
        if "aa" in args.parts or "overhead" in args.parts:
            for i in range(args.repeats):
                t0 = time.monotonic()
                r = ev.evaluate(aa_candidate(task, i))
                wall = time.monotonic() - t0
                if r.status != "ok" or r.timing is None:
                    q.failures.append(f"{r.status}: {r.reason}")
                    print(f"  {q.name}: A/A evaluation {i + 1} failed: {r.status}: {r.reason}", file=sys.stderr, flush=True)
                    continue
                q.speedups.append(r.timing.speedup)
                q.significant += r.faster
                q.false_wins += r.faster and r.timing.speedup >= args.threshold
                q.busy += "machine_busy" in r.flags
                q.reruns += len(r.timing.reruns)
                q.overhead.add(wall, r, task.timing.reps, task.timing.warmup)
                q.load.append(os.getloadavg()[0])
                print(f"  {q.name}: A/A {i + 1}/{args.repeats}: {r.timing.speedup:.3f}x{' significant' if r.faster else ''}"
                      f"{' machine_busy' if 'machine_busy' in r.flags else ''}, {len(r.timing.reruns)} rounds re-run, "
                      f"{wall:.1f} s, load {q.load[-1]:.2f}", file=sys.stderr, flush=True)
        if "cv" in args.parts:
            groups, failed = time_interleaved(ev, {"base": Binary(ev.baseline_binary(), task.timing.threads, task.timing.ranks, None)},
                                              args.cv_rounds, "base", reps=args.cv_reps)
            if failed:  # the baseline is the reference: time_interleaved raises rather than fail it
                raise AssertionError(failed)
            g = groups["base"]
            q.cv_within = statistics.median(cv(x) for x in g)
            q.cv_across = cv([statistics.median(x) for x in g])
            q.cv_median_s = statistics.median(x for p in g for x in p)
        if "protocol" in args.parts:
            q.protocol = protocol_cost(ev, task, args.protocol_calls)
    finally:
        ev.close()
    return q


def protocol_cost(ev: CFamilyEvaluator, task: Task, calls: int) -> dict[str, float]:
    """Part (d): the empty kernel's calls as the monitor times them, beside the baseline's, at the timing size."""
    import secrets

    empty, _ = ev.build(Candidate(files={task.kernel: f"{task.signature} {{ }}\n"}))
    out: dict[str, float] = {}
    for who, path in (("empty", empty), ("base", ev.baseline_binary())):
        b = Binary(path, task.timing.threads, task.timing.ranks, None)
        seeds = [secrets.randbits(62) for _ in range(calls + 1)]
        run, d, r = ev.run_driver(b, [task.sizes.timing], seeds, True, 600.0, warmup=1, reps=calls)
        if not run.complete:
            raise AssertionError(f"{who}: {run.error or r.stderr[-300:]}")
        times = sorted(c.time for c in run.calls if not c.warmup)
        out[f"{who}_median"] = statistics.median(times)
        out[f"{who}_p90"] = times[int(0.9 * (len(times) - 1))]
        out[f"{who}_outside"] = (r.wall_s - sum(c.time for c in run.calls)) / len(run.calls)
    return out


def tables(rows: list[TaskQuality], args: argparse.Namespace) -> list[str]:
    out: list[str] = []
    n = sum(len(r.speedups) for r in rows)
    if "aa" in args.parts and n:
        k = sum(r.false_wins for r in rows)
        sig = sum(r.significant for r in rows)
        lo, hi = clopper_pearson(k, n)
        out += [f"A/A: each baseline against itself, full protocol, {args.repeats} evaluations per task; false win = judged "
                f"significantly faster and ≥ {args.threshold:.2f}x", "",
                "| task | evaluations | median speedup | min | max | significant | false wins | machine_busy | rounds re-run | failed |",
                "|---|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            if r.speedups:
                out.append(f"| {r.name} | {len(r.speedups)} | {statistics.median(r.speedups):.3f} | {min(r.speedups):.3f} | "
                           f"{max(r.speedups):.3f} | {r.significant} | {r.false_wins} | {r.busy} | {r.reruns} | {len(r.failures)} |")
        loads = [x for r in rows for x in r.load]
        out += [f"Load average (1 min) after each evaluation: median {statistics.median(loads):.2f}, max {max(loads):.2f} "
                f"(the evaluated programs themselves count for about 1).", ""]
        verdict = "meets" if k / n <= 0.01 else "misses"
        note = f" (with no false win, {zero_fail_n(0.01)} evaluations bring it there)" if k == 0 and hi > 0.01 else ""
        out += ["", f"**{k} false wins in {n} A/A evaluations: {100 * k / n:.2f}% (95% Clopper-Pearson {100 * lo:.2f}–{100 * hi:.2f}%)**; "
                f"{sig} judged significantly faster at any speedup. The point estimate {verdict} the ≤ 1% acceptance; the interval's "
                f"upper end is {'at or below' if hi <= 0.01 else 'above'} 1%{note}.", ""]
    if "cv" in args.parts:
        out += [f"Spread of one kernel's timings: the baseline alone, {args.cv_rounds} processes × {args.cv_reps} timed calls", "",
                "| task | median s/call | CV within a process (median) | CV across processes (of process medians) |", "|---|---|---|---|"]
        for r in rows:
            if r.cv_within is not None and r.cv_across is not None and r.cv_median_s is not None:
                out.append(f"| {r.name} | {r.cv_median_s:.4f} | {100 * r.cv_within:.1f}% | {100 * r.cv_across:.1f}% |")
        out.append("")
    if "overhead" in args.parts and n:
        out += ["Evaluator overhead (means per A/A evaluation, seconds; share = 1 − timed calls / (wall − lock wait))", "",
                "| task | eval wall | lock wait | build | verify | race | timing phase | timed calls | warm-up calls (est.) | other "
                "| overhead share | without warm-up calls |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            o = r.overhead
            if not o.wall:
                continue
            m = {p: statistics.mean(v) for p, v in o.phases.items()}
            other = statistics.mean(o.wall) - statistics.mean(o.wait) - sum(m.values())
            out.append(f"| {r.name} | {statistics.mean(o.wall):.2f} | {statistics.mean(o.wait):.2f} | {m['build']:.2f} | {m['verify']:.2f} | "
                       f"{m['race']:.2f} | {m['time']:.2f} | {statistics.mean(o.timed):.2f} | {statistics.mean(o.warmup):.2f} | {other:.2f} | "
                       f"{100 * o.share():.0f}% | {100 * o.share(count_warmup=False):.0f}% |")
        out.append("")
    if "protocol" in args.parts:
        out += [f"Monitor protocol cost per call: an empty kernel and the baseline, each {args.protocol_calls} timed calls at the "
                "timing size, as the monitor times them", "",
                "| task | empty kernel: median | p90 | baseline call: median | protocol share of a baseline call "
                "| outside the windows per call (empty kernel) |", "|---|---|---|---|---|---|"]
        for r in rows:
            p = r.protocol
            if p:
                out.append(f"| {r.name} | {1e3 * p['empty_median']:.3f} ms | {1e3 * p['empty_p90']:.3f} ms | {p['base_median']:.4f} s | "
                           f"{100 * p['empty_median'] / p['base_median']:.2f}% | {1e3 * p['empty_outside']:.1f} ms |")
        out.append("")
    return out


def main(argv: list[str] | None = None, parts: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", nargs="+", default=DEFAULT_TASKS)
    ap.add_argument("--repeats", type=int, default=25, help="A/A evaluations per task")
    ap.add_argument("--threshold", type=float, default=1.05, help="a significant A/A speedup at least this large is a false win")
    ap.add_argument("--cv-rounds", type=int, default=10, help="processes for the spread measurement")
    ap.add_argument("--cv-reps", type=int, default=5, help="timed calls per process for the spread measurement")
    ap.add_argument("--protocol-calls", type=int, default=30, help="timed calls of the empty kernel and the baseline (part protocol)")
    ap.add_argument("--parts", nargs="+", choices=["aa", "cv", "overhead", "protocol"], default=parts or ["aa", "cv", "overhead", "protocol"])
    ap.add_argument("--markdown", nargs="?", type=Path, const=DOC, default=None, help="write the tables into this file (docs/benchmarks.md)")
    args = ap.parse_args(argv)
    if args.repeats < 1 or args.cv_rounds < 2 or args.cv_reps < 2:
        ap.error("--repeats must be at least 1, --cv-rounds and --cv-reps at least 2")
    rows = []
    for task_dir in args.tasks:
        print(f"  {task_dir} ...", file=sys.stderr, flush=True)
        rows.append(measure(task_dir, args))
    lines = tables(rows, args)
    print("\n".join(lines))
    if args.markdown:
        info = machine()
        command = "python bench/quality.py " + " ".join(sys.argv[1:] if argv is None else argv)
        head = (f"Measured {info['date']} with `{command}` on {info['cpu']}, {info['cores']} cores; {info['gcc']}; {info['clang']}; "
                f"{info['os']}; kernopt {info['kernopt']}.")
        update_markdown(args.markdown, "quality", "\n".join([head, "", *lines]))
        print(f"wrote the tables into {args.markdown}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
