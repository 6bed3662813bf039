"""Timing of torch-family candidates: interleaved processes, device events, L2 flush, rotated inputs.

Each round runs one process per side: baseline (the task's solution.py as given) and candidate, their
order flipping every round, plus the reference in eager PyTorch and under torch.compile when the task
asks. Every process gets the same seeds, one per call: each call's inputs are made anew (in one of
`timing.rotate` buffers) outside the timed region, so no call repeats an earlier one's inputs and a
cache of results cannot replay answers. Each call is timed with device events around it and a full
device synchronize before the end event, after an L2 flush. In every round the host draws which timed
calls are checked (the last one and two more, unknown to the candidate, whose process never sees its job
file's contents): their outputs are compared with the reference's (or the baseline's) for the same inputs. Statistics as in the C family: ratio of
medians with a process bootstrap, a rank test and a paired bound, and a wall-clock cross-check.
"""

from __future__ import annotations

import secrets
from pathlib import Path

from kernopt.errors import InfraError
from kernopt.evaluators import stats
from kernopt.evaluators.base import EvalFail, describe_exit, new_seed, tail
from kernopt.evaluators.result import TimingStats
from kernopt.evaluators.torch_family.compare import Comparison, RunnerRun, consistent, describe_shape, load_arrays
from kernopt.evaluators.torch_family.host import Host

_rng = secrets.SystemRandom()
_ROLE = {"baseline": "baseline", "candidate": "candidate", "eager": "reference", "compile": "compile"}


def time_rounds(ev: Host, source: str, rounds: int, ext: Path | None = None) -> TimingStats:

    task, cfg, tt = ev.task, ev.config, ev.task.timing
    dev = ev.device()
    shape = dict(task.shapes.timing)
    where = f"timing shape {describe_shape(shape) or '(reference.py defaults)'}"
    reps = cfg.reps or tt.reps
    job = {"shape": shape, "init_seed": new_seed(), "seeds": [new_seed() for _ in range(tt.warmup + reps)], "rotate": tt.rotate,
           "warmup": tt.warmup, "reps": reps, "flush_l2": tt.flush_l2, "flush_bytes": max(256 << 20, 4 * dev.l2_bytes)}
    extras = (["eager"] if tt.compare_eager else []) + (["compile"] if tt.compare_compile and dev.cuda else [])
    per: dict[str, list[list[float]]] = {who: [] for who in ("baseline", "candidate", *extras)}
    walls: list[dict[str, tuple[float, float, float, float]]] = []
    compile_cache: Path | None = None
    compile_ok = "compile" in extras
    baseline = task.baseline_source()
    try:
        for rnd in range(rounds):
            order = ["baseline", "candidate", *[e for e in extras if e != "compile" or compile_ok]]
            if rnd % 2:
                order.reverse()
            runs: dict[str, tuple[RunnerRun, Path]] = {}
            first = tt.warmup
            checked = sorted(_rng.sample(range(first, first + reps), min(2, reps)))
            round_job = {**job, "check": checked}
            round_walls: dict[str, tuple[float, float, float, float]] = {}
            try:
                for who in order:
                    carry = {".inductor": compile_cache / ".inductor", ".triton": compile_cache / ".triton"} if (
                        who == "compile" and compile_cache) else None
                    src = source if who == "candidate" else baseline if who == "baseline" else None
                    prebuilt = ext if who == "candidate" else ev.baseline_extension() if who == "baseline" else None
                    run, d, r = ev.run_role(_ROLE[who], "time", round_job, tt.timeout_s, source=src, ext=prebuilt, carry=carry)
                    runs[who] = (run, d)
                    if who == "candidate":
                        ev.check_run(run, r, where, tt.timeout_s)
                    elif not (r.ok and run.complete and run.timed_s()):
                        if who == "compile":
                            compile_ok = False
                            continue
                        why = run.error["error"] if run.error else f"{describe_exit(r)}: {tail(r.stderr, 3)}"
                        raise InfraError(f"the {who} process failed while timing at {where}: {why}")
                    if who == "compile" and compile_cache is None:
                        compile_cache = d
                        runs.pop(who)  # kept: later compile processes start from its caches
                    per[who].append(run.timed_s())
                    if who in ("baseline", "candidate"):
                        round_walls[who] = (stats.median(run.timed_s()), stats.median(run.walls_s()),
                                            sum(w for _, w, _ in run.times), r.wall_s)
                walls.append({"base": round_walls["baseline"], "cand": round_walls["candidate"]})
                truth = runs.get("eager") or runs["baseline"]
                got = runs["candidate"]
                for i in sorted({*checked, first + reps - 1}):
                    want, have = truth[0].timed.get(i), got[0].timed.get(i)
                    if want is None or have is None:
                        raise EvalFail("runtime_error", f"no output recorded for timed call {i + 1} [round {rnd + 1}, {where}]")
                    why = Comparison(task.verify).mismatch(have.outputs, load_arrays(got[1], have.file),
                                                           want.outputs, load_arrays(truth[1], want.file))
                    if why:
                        raise EvalFail("wrong_answer", f"{why} [timed call {i + 1}, round {rnd + 1}, {where}, seed {have.seed}]")
            except (OSError, ValueError, KeyError) as e:
                raise EvalFail("runtime_error", f"a timed output is unreadable ({type(e).__name__}: {e})") from None
            finally:
                ev.cleanup(*(d for _, d in runs.values()))
            if rnd >= 1 and stats.median(per["candidate"]) > cfg.early_stop_ratio * stats.median(per["baseline"]):
                break
    finally:
        ev.cleanup(compile_cache)
    speedup, lo, hi = stats.ratio_of_medians(per["baseline"], per["candidate"])
    return TimingStats(baseline_s=[x for g in per["baseline"] for x in g], candidate_s=[x for g in per["candidate"] for x in g],
                       baseline_median_s=stats.median(per["baseline"]), candidate_median_s=stats.median(per["candidate"]),
                       speedup=speedup, ci_low=lo, ci_high=hi, p_value=stats.faster_p_value(per["baseline"], per["candidate"]),
                       paired_low=stats.paired_lower_bound(per["baseline"], per["candidate"]), consistent=consistent(walls),
                       device=dev.label, eager_median_s=stats.median(per["eager"]) if per.get("eager") else None,
                       compile_median_s=stats.median(per["compile"]) if compile_ok and per.get("compile") else None)
