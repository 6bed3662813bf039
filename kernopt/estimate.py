"""How long a run will take: the estimate printed before the first candidate and the ETA of the progress
bar. Pure functions (no clock, no I/O), so each is tested as a unit.

The up-front estimate is arithmetic on the task's timing settings: each timed candidate runs `rounds`
rounds of two programs (baseline and candidate), each `warmup + reps` calls at the timing size. Before
the baseline's call time is known (the first timed result gives it) the per-call time is the band
`kernopt task check` accepts (0.2-2 s), so the estimate is a range; building, verifying and the race
check are added once measured. Lock waits (other runs on the host) come on top: "more if busy".

The ETA is the mean duration of the candidates evaluated so far times the candidates left (the
up-front estimate until the first one finishes), less the time the current one has already run.
"""

from __future__ import annotations

from dataclasses import dataclass

CALL_BAND_S = (0.2, 2.0)  # the per-call band `task check` requires of the timing size
START_S = 0.3  # per timing process: start-up, input fill (measured 0.1-0.5 s on the C tasks here)


@dataclass(frozen=True)
class Estimate:
    """Seconds per candidate (a range when the call time is not known yet) and the line that says it."""

    low_s: float
    high_s: float
    text: str

    @property
    def per_candidate_s(self) -> float:
        """One number for the ETA: the middle of the range (geometric: the band spans 10x)."""
        return (self.low_s * self.high_s) ** 0.5


def fmt_duration(seconds: float) -> str:
    """'40 s', '9 min', '1.5 h'."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def estimate(rounds: int, warmup: int, reps: int, candidates: int, baseline_call_s: float | None = None,
             checking_s: float | None = None) -> Estimate:
    """The run's duration from its timing settings. `baseline_call_s`: the baseline's measured median call
    (None: not timed yet, the task-check band is used); `checking_s`: the measured time of building,
    verifying and race-checking one candidate (None: not known, left out and said so)."""
    calls = rounds * 2 * (warmup + reps)
    starts = rounds * 2 * START_S
    check = checking_s or 0.0
    if baseline_call_s is None:
        lo, hi = (calls * c + starts + check for c in CALL_BAND_S)
        basis = (f"{rounds} rounds x 2 programs x {warmup}+{reps} calls = {calls} timed-size calls per candidate at "
                 f"{CALL_BAND_S[0]:g}-{CALL_BAND_S[1]:g} s per call (the baseline is not timed yet)")
        per = f"~{fmt_duration(lo)}-{fmt_duration(hi)} per candidate"
        total = f"~{fmt_duration(lo * candidates)}-{fmt_duration(hi * candidates)} for {candidates} candidates"
    else:
        # A candidate is assumed to take the baseline's time (faster ones take less; much slower ones stop early).
        lo = hi = calls * baseline_call_s + starts + check
        basis = (f"{calls} timed-size calls per candidate at the baseline's {baseline_call_s:.3g} s per call")
        per = f"~{fmt_duration(lo)} per candidate"
        total = f"~{fmt_duration(lo * candidates)} for {candidates} more candidate{'s' * (candidates != 1)}"
    basis += f", plus {fmt_duration(check)} of building and checking" if checking_s is not None else \
        ", plus building and checking (not measured yet)"
    return Estimate(lo, hi, f"estimate: {per}, {total} (more if the machine is busy); based on {basis}")


def eta_s(durations: list[float], remaining: int, current_s: float = 0.0, prior_s: float | None = None) -> float | None:
    """Seconds left: the mean of `durations` (the candidates evaluated so far; resumed ones from the log
    excluded) times the `remaining` candidates (the current one included), less `current_s` it has run
    already (never below zero for the current one). Before any has finished, `prior_s` (the up-front
    estimate) stands in for the mean; None when neither is known."""
    if remaining <= 0:
        return 0.0
    per = sum(durations) / len(durations) if durations else prior_s
    if per is None:
        return None
    return max(0.0, per - current_s) + per * (remaining - 1)


def for_run(task: object, rounds: int | None, reps: int | None, candidates: int, baseline_call_s: float | None = None,
            checking_s: float | None = None) -> Estimate | None:
    """estimate() with a C-family task's own settings (`rounds`, `reps`: the run's overrides, None = the
    task's); None for tasks timed another way (the torch family) or when no candidate is left."""
    from kernopt.task import Task

    if not isinstance(task, Task) or candidates <= 0:
        return None
    return estimate(rounds or task.timing_rounds, task.timing.warmup, reps or task.timing.reps, candidates,
                    baseline_call_s, checking_s)


def bench_eta_s(durations: list[float], remaining: int, parallel: int) -> float | None:
    """A bench's seconds left: the mean duration of the tasks finished so far times the tasks left (running
    ones included), shared by the `parallel` tasks running at once. None before any task has finished."""
    if remaining <= 0:
        return 0.0
    if not durations:
        return None
    return sum(durations) / len(durations) * remaining / max(1, parallel)
