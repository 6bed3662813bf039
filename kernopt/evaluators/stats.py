"""Timing statistics: ratio of medians, a bootstrap confidence interval, a one-sided rank test and
a paired per-round bound.

Calls timed inside one process are not independent (same placement, same page layout, same
neighbours on the machine), so when samples come grouped by process, the interval resamples
whole processes and the rank test compares per-process medians. Treating every call as an
independent sample understates the noise and turns drift into false wins.

On the development VM one process's calls can run 10-25% slower than the next process's, so a
5% test level on 5 processes per side still called a program 1.18x faster than itself (A/A).
A candidate is therefore only "faster" when three tests agree at strict levels (see
TimingStats.significant): the process bootstrap, the rank test at 1%, and a 99% lower bound from
the rounds' paired log ratios (a round runs one baseline and one candidate process back to back).
"""

from __future__ import annotations

import math
import os

import numpy as np

from kernopt.evaluators.result import TimingStats

Samples = list[float] | list[list[float]]


def timing_stats(baseline: list[list[float]], candidate: list[list[float]], **extra: object) -> TimingStats:
    """The statistics of one interleaved timing from its per-process samples (one list of call times per process,
    round by round on both sides): ratio of medians with its bootstrap interval, the rank test, the paired bound.
    `extra`: the other TimingStats fields (consistent, reruns, machine_busy, threads, ...). The same function makes
    a candidate's comparison with the baseline and with the search's best (PairedComparison)."""
    speedup, lo, hi = ratio_of_medians(baseline, candidate)
    return TimingStats(baseline_s=[x for g in baseline for x in g], candidate_s=[x for g in candidate for x in g],
                       baseline_median_s=median(baseline), candidate_median_s=median(candidate), speedup=speedup,
                       ci_low=lo, ci_high=hi, p_value=faster_p_value(baseline, candidate),
                       paired_low=paired_lower_bound(baseline, candidate), **extra)  # type: ignore[arg-type]


def _groups(xs: Samples) -> list[np.ndarray]:
    if xs and isinstance(xs[0], list):
        return [np.asarray(g, dtype=float) for g in xs if g]  # type: ignore[arg-type]
    return [np.asarray([x], dtype=float) for x in xs]  # type: ignore[arg-type]


def _process_medians(xs: Samples) -> list[float]:
    """One median per process (per sample, for flat lists)."""
    return [float(np.median(g)) for g in _groups(xs)]


def median(xs: Samples) -> float:
    return float(np.median(np.concatenate(_groups(xs))))


def ratio_of_medians(baseline: Samples, candidate: Samples, resamples: int = 2000,
                     seed: int = 0) -> tuple[float, float, float]:
    """Speedup median(baseline)/median(candidate) and its 95% percentile-bootstrap interval.

    Each argument is a flat list of times, or a list of per-process lists (then processes are
    resampled as units, and the calls of a resampled process come along).
    """
    point = median(baseline) / median(candidate)
    lo, hi = np.quantile(bootstrap_ratios(baseline, candidate, resamples, seed), [0.025, 0.975])
    return point, float(lo), float(hi)


def bootstrap_ratios(baseline: Samples, candidate: Samples, resamples: int = 2000, seed: int = 0) -> np.ndarray:
    """The bootstrap distribution behind ratio_of_medians: `resamples` ratios of resampled medians
    (whole processes resampled when samples are grouped). Aggregates such as a geometric mean over
    tasks combine these elementwise (bench/peers.py)."""
    rng = np.random.default_rng(seed)
    return _resampled_medians(_groups(baseline), rng, resamples) / _resampled_medians(_groups(candidate), rng, resamples)


def _resampled_medians(groups: list[np.ndarray], rng: np.random.Generator, resamples: int) -> np.ndarray:
    """Medians of `resamples` bootstrap samples drawn by resampling whole groups."""
    picks = rng.integers(0, len(groups), size=(resamples, len(groups)))
    if len({g.size for g in groups}) == 1:  # the usual case: vectorized
        table = np.stack(groups)  # (groups, calls)
        return np.median(table[picks].reshape(resamples, -1), axis=1)
    return np.array([np.median(np.concatenate([groups[j] for j in row])) for row in picks])


def paired_lower_bound(baseline: Samples, candidate: Samples, confidence: float = 0.99) -> float:
    """One-sided lower confidence bound of the speedup from per-round paired ratios.

    Round i pairs baseline group i with candidate group i; the log of the ratio of their medians
    is treated as normal (Student t over the rounds). 0.0 when there are fewer than 2 rounds.
    """
    from scipy.stats import t as student_t

    b, c = _process_medians(baseline), _process_medians(candidate)
    rounds = min(len(b), len(c))
    d = np.log(b[:rounds]) - np.log(c[:rounds])
    if d.size < 2:
        return 0.0
    spread = float(d.std(ddof=1)) / np.sqrt(d.size)
    return float(np.exp(d.mean() - student_t.ppf(confidence, d.size - 1) * spread))


def faster_p_value(baseline: Samples, candidate: Samples) -> float:
    """One-sided Mann-Whitney U p-value for 'candidate times are smaller than baseline times',
    on per-process medians when samples are grouped by process."""
    from scipy.stats import mannwhitneyu

    b, c = _process_medians(baseline), _process_medians(candidate)
    if len(set(b) | set(c)) == 1:
        return 1.0
    return float(mannwhitneyu(b, c, alternative="greater").pvalue)


def walls_consistent(walls: list[dict[str, tuple[float, float]]], fixed_s: float, noise: bool = True) -> bool:
    """Whether the kernel time the monitor saw the candidate save shows in the processes' wall clocks.

    `walls`: per round, for "base" and "cand", (process wall, sum of its calls' times). A round's gap is the
    reported saving less the wall saving, that is how much more time the candidate's process spent outside its
    calls than the baseline's. Inconsistent when the median gap exceeds a quarter of the baseline's call time
    plus `fixed_s` plus, with `noise` (CPU targets), the spread of the baseline's own time outside its calls
    over the rounds (capped at its call time): that time (allocating, filling inputs, writing outputs) is
    trusted code, the same in every round, and on tasks with big buffers it varied by 0.3 s between
    processes (page cache writeback), which alone turned honest 2x candidates inconsistent. A candidate can widen
    that spread only by leaving the machine disturbed for the next process (memory pressure, an evicted page
    cache), and on CPU targets a wider allowance buys nothing: the CPU its process uses outside the windows is
    charged to its calls (time()), so this check is the backup there. Where the baseline's own spread reaches its
    call time, the check cannot tell anything apart."""
    gaps = [(w["base"][1] - w["cand"][1]) - (w["base"][0] - w["cand"][0]) for w in walls]
    calls = median([w["base"][1] for w in walls])
    outside = [w["base"][0] - w["base"][1] for w in walls]
    spread = min(max(outside) - min(outside), calls) if noise and len(outside) >= 2 else 0.0
    return median(gaps) <= 0.25 * calls + fixed_s + spread

# A busy machine (docs/verification.md, "Busy machine"). A round is disturbed when its *baseline*
# process (trusted code, the same in every round, so the candidate cannot steer this) got less than
# BUSY_SHARE of the CPU its threads could use inside the timed calls, or its median call is more than
# BUSY_SLOW times the evaluation's undisturbed baseline processes' median: that round runs again.
# A candidate process below BUSY_SHARE of the candidate's own usual share is never a reason to re-run
# (the candidate controls its own CPU use, so it could pick rounds); it can only turn a verdict that
# is not significant into machine_busy, which is never a win either.
# It is disturbed too when the rest of the machine kept more than BUSY_OTHERS CPUs busy during its calls
# (the monitor's /proc/stat reading less the process's own CPU): a neighbour on the other core or the same
# physical core's sibling slows a process that still got all of its own CPU (shared caches, memory
# bandwidth, SMT), which the share rule cannot see.
BUSY_SHARE = 0.8
BUSY_SLOW = 1.5
BUSY_OTHERS = 0.3
TICK_S = 0.01  # /proc/stat's unit: Linux's USER_HZ is 100


def cpu_share(cpu_in: list[float], times: list[float]) -> float:
    """A process's median cpu_in / time over its timed calls: the CPUs it kept busy inside them."""
    return float(np.median([c / t for c, t in zip(cpu_in, times, strict=True) if t > 0] or [1.0]))


def others_share(others: list[float | None], times: list[float], cpus: int) -> float | None:
    """The CPUs the rest of the machine surely kept busy during a process's timed calls; None when the monitor
    could not read the machine's counters. /proc/stat counts clock ticks (TICK_S), so each call's figure may be
    off by a tick per CPU either way: the sum over the calls less twice its spread (ticks x CPUs x sqrt(calls)),
    over the calls' time. Processes whose calls last a few ticks in all can therefore never show it: the
    small tasks' 3 x 3 ms calls are below what this can see (docs/verification.md, "Busy machine")."""
    if any(o is None for o in others):
        return None
    total = sum(times)
    slack = 2 * TICK_S * max(1, cpus) * math.sqrt(len(times))
    return max(0.0, (sum(o for o in others if o is not None) - slack) / total) if total > 0 else 0.0


def disturbed(cpu_in: list[float], times: list[float], reference: float | None, cpu: bool = True,
              others: list[float | None] | None = None, cpus: int | None = None) -> str:
    """Why a baseline process looks disturbed ('' when it does not), from the monitor's per-call figures.

    The threads the process keeps busy, k, are its cpu_share rounded to a whole number (at least 1): a
    serial baseline shows about 1.0 on a quiet machine and about 0.5 beside a CPU hog on every core. The
    process is disturbed when cpu_share / k is below BUSY_SHARE (its threads were runnable but not
    running), or when its median time is above BUSY_SLOW x `reference` (the median of the undisturbed
    baseline processes so far; None before there are two). `cpu` False (GPU targets, whose host threads
    may sleep while the device works): the time rule alone. `others`: each call's CPU-seconds used by the
    rest of the machine inside its window (the monitor's figure; None for a call where it could not read
    them, which fails closed: disturbed); more than BUSY_OTHERS CPUs beyond a clock tick's error (others_share,
    over `cpus` CPUs: the machine's, by default this one's) is disturbed. Where those are read, the share rule
    judges only a process that keeps one thread busy (k = 1): a parallel one's threads also wait on each other."""
    if not times:
        return ""
    concurrency = cpu_share(cpu_in, times)
    k = max(1, round(concurrency))
    measured = others is not None and all(o is not None for o in others)
    # A parallel program's threads also wait on each other (a wavefront's barriers: 1.53 CPUs of 2 on a quiet machine,
    # issue 27), which this rule cannot tell from waiting for a CPU: where the machine's own counters are read, they
    # judge a parallel process, and this rule a serial one.
    if cpu and concurrency / k < BUSY_SHARE and (k == 1 or not measured):
        return f"the baseline got {concurrency / k:.0%} of the CPU of its {k} thread{'s' * (k > 1)} inside its calls"
    if cpu and others is not None:
        rest = others_share(others, times, cpus or os.cpu_count() or 1)
        if rest is None:
            return "the machine's CPU counters (/proc/stat) could not be read, so interference cannot be ruled out"
        if rest > BUSY_OTHERS:
            return f"other processes kept {rest:.1f} CPUs busy during the baseline's calls"
    mid = float(np.median(times))
    if reference is not None and mid > BUSY_SLOW * reference:
        return f"the baseline's calls took {mid / reference:.1f}x its usual time"
    return ""


def starved(shares: list[float]) -> list[int]:
    """The rounds (0-based) whose candidate process got less than BUSY_SHARE of the candidate's median cpu_share."""
    usual = float(np.median(shares)) if shares else 0.0
    return [i for i, s in enumerate(shares) if s < BUSY_SHARE * usual]
