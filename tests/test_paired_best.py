"""Issue 28: the search's "new best" is decided by timing a candidate against the best (PairedComparison), not by
comparing two speedups measured against separate baseline timings; plausibility is judged against the verified best;
each guard's time is its own phase."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import pytest

from kernopt.agent.base import SearchState
from kernopt.agent.search import Hooks, get_search, is_better
from kernopt.candidate import Candidate
from kernopt.config import EvalConfig, SearchConfig
from kernopt.evaluators import stats
from kernopt.evaluators.base import SandboxedEvaluator
from kernopt.evaluators.c_family.evaluator import CFamilyEvaluator
from kernopt.evaluators.result import EvalResult, PairedComparison, TimingStats, VerifiedBest
from kernopt.runs import phase_summary
from kernopt.task import load_task
from kernopt.ui import fmt_speedup
from tests.conftest import SMALL_GEMM, needs

# The gemm: three layouts ran at 34.1-34.3 ms per call; their evaluations timed the baseline at 0.692 s,
# 0.832 s and 0.791 s, so they read 20.2x, 24.4x and 23.0x.
SAME_S = 0.0342
BASELINES = [0.692, 0.832, 0.791, 0.700]


def samples(rng: random.Random, per_call_s: float, processes: int = 5, calls: int = 3, noise: float = 0.01) -> list[list[float]]:
    """Per-process call times: each process off by its own factor (placement), each call by a little more."""
    out = []
    for _ in range(processes):
        proc = per_call_s * (1 + rng.gauss(0, noise))
        out.append([proc * (1 + rng.gauss(0, noise / 3)) for _ in range(calls)])
    return out


def timed(c: Candidate, per_call_s: float, baseline_s: float, rng: random.Random) -> EvalResult:
    t = stats.timing_stats(samples(rng, baseline_s), samples(rng, per_call_s))
    return EvalResult(candidate_id=c.id, status="ok", timing=t, reason=t.describe())


def paired(cand: Candidate, cand_s: float, best: Candidate, best_s: float, rng: random.Random) -> PairedComparison:
    """What the evaluator records: the candidate timed in the same rounds as the best's program."""
    return PairedComparison.of(best.id, stats.timing_stats(samples(rng, best_s), samples(rng, cand_s)))


def cand(name: str) -> Candidate:
    return Candidate(files={"kernel.c": name}, idea=name)


# ------------------------------------------------------------------------------ the decision, synthetic samples
@pytest.mark.parametrize("seed", range(20))
def test_same_speed_under_different_baseline_timings_never_replaces_the_best(seed: int) -> None:
    rng = random.Random(seed)
    a, b = cand("layout a"), cand("layout b")
    ra = timed(a, SAME_S, BASELINES[0], rng)  # ~20.2x
    rb = timed(b, SAME_S, BASELINES[1], rng)  # ~24.3x: the same kernel, a slower baseline timing
    assert ra.faster and rb.faster
    assert rb.speedup is not None and ra.speedup is not None and rb.speedup > 1.15 * ra.speedup  # the old rule would switch
    assert VerifiedBest.of(a, ra) is not None and VerifiedBest.of(a, ra).may_be_beaten(rb.timing)  # type: ignore[union-attr,arg-type]
    rb.vs_best = paired(b, SAME_S, a, SAME_S, rng)
    assert not rb.vs_best.replaces_best and 0.97 < rb.vs_best.ratio < 1.03
    assert not is_better(rb, (a, ra))
    # and the other way round: the faster-reading one first, the slower-reading one never takes over either
    ra.vs_best = paired(a, SAME_S, b, SAME_S, rng)
    assert not is_better(ra, (b, rb))


@pytest.mark.parametrize("seed", range(20))
def test_a_candidate_5_percent_faster_replaces_the_best_even_when_its_speedup_reads_lower(seed: int) -> None:
    rng = random.Random(seed)
    a, d = cand("layout a"), cand("layout d")
    ra = timed(a, SAME_S, BASELINES[1], rng)  # ~24.3x
    rd = timed(d, 0.95 * SAME_S, BASELINES[0], rng)  # 5% faster, but ~21.3x against its own baseline timing
    assert rd.speedup is not None and ra.speedup is not None and rd.speedup < ra.speedup  # the old rule would drop it
    assert VerifiedBest.of(a, ra).may_be_beaten(rd.timing)  # type: ignore[union-attr,arg-type]
    rd.vs_best = paired(d, 0.95 * SAME_S, a, SAME_S, rng)
    assert rd.vs_best.replaces_best and 1.03 < rd.vs_best.ratio < 1.08
    assert is_better(rd, (a, ra))


def test_the_decision_needs_the_comparison_with_this_best() -> None:
    rng = random.Random(1)
    a, b, d = cand("a"), cand("b"), cand("d")
    ra, rd = timed(a, SAME_S, 0.7, rng), timed(d, 0.9 * SAME_S, 0.7, rng)
    rd.vs_best = paired(d, 0.9 * SAME_S, b, SAME_S, rng)  # against another best: says nothing about a
    assert rd.vs_best.replaces_best and not is_better(rd, (a, ra))
    rd.vs_best = None
    rd.flags.append("vs_best_failed")  # the comparison could not be made: the best stays
    assert not is_better(rd, (a, ra))
    rd.flags.clear()  # no comparison at all (an evaluator that never compares): the speedups decide, as before
    assert is_better(rd, (a, ra))
    assert is_better(rd, None)  # the first significantly faster candidate is the best


# ------------------------------------------------------------------------------ every strategy, one decision
class ListPolicy:
    """Proposes the given programs in order, whatever the parent."""

    name = "list"

    def __init__(self, names: list[str]) -> None:
        self.names = names

    def propose(self, state: SearchState, n: int) -> list[Candidate]:
        fresh = [cand(x) for x in self.names if cand(x).id not in state.seen]
        return [Candidate(files=c.files, idea=c.idea, parent=state.parent.id) for c in fresh[:n]]


class PairingEvaluator:
    """A stand-in for the C family's evaluate(candidate, best): the candidate's true time per call by name, a
    different baseline timing in each evaluation, and the paired timing against `best` when it may beat it."""

    def __init__(self, true_s: dict[str, float], seed: int) -> None:
        self.true_s, self.rng, self.calls = true_s, random.Random(seed), 0
        self.bests: list[str | None] = []

    def __call__(self, c: Candidate, best: VerifiedBest | None) -> tuple[EvalResult, bool]:
        r = timed(c, self.true_s[c.idea], BASELINES[self.calls % len(BASELINES)], self.rng)
        self.calls += 1
        self.bests.append(best.candidate.idea if best else None)
        if best is not None and r.faster and r.timing is not None and best.may_be_beaten(r.timing):
            r.vs_best = paired(c, self.true_s[c.idea], best.candidate, self.true_s[best.candidate.idea], self.rng)
        return r, False


@pytest.mark.parametrize("strategy", ["greedy", "best-of-n", "beam", "tree", "evolve"])
def test_every_strategy_keeps_the_first_of_equal_programs_and_takes_the_faster_one(strategy: str) -> None:
    names = ["a", "b", "c", "d"]  # a, b, c: the same 34.2 ms; d: 5% faster
    true_s = {"a": SAME_S, "b": SAME_S, "c": SAME_S, "d": 0.95 * SAME_S}
    base = Candidate(files={"kernel.c": "base"}, idea="base", author="baseline")
    state = SearchState(task=load_task(SMALL_GEMM), baseline=base, parent=base)
    ev = PairingEvaluator(true_s, seed=7)
    search = get_search(SearchConfig(type=strategy, max_candidates=4, batch=4, patience=5), ListPolicy(names), ev, Hooks())
    bests: list[str] = []

    class Track(Hooks):
        def on_eval_done(self, candidate: Candidate, result: EvalResult, cached: bool,
                         best: tuple[Candidate, EvalResult] | None) -> None:
            bests.append(best[0].idea if best else "-")

    search.hooks = Track()
    best = search.run(state)
    order = [c.idea for c, _ in state.history]
    assert sorted(order) == names
    first = order[0]
    # b and c read 24.3x and 22.9x against their baselines (a: 20.2x) but never take a's place; d does
    assert best is not None and best[0].idea == "d"
    before_d = bests[: order.index("d")]
    assert set(before_d) == {first}, before_d
    assert ev.bests[0] is None and all(b == first for b in ev.bests[1 : order.index("d") + 1])  # each told whom to beat
    # and the answer a resumed run gets from the log is the same: the logged results decide again
    logged = {c.id: EvalResult.model_validate_json(r.model_dump_json()) for c, r in state.history}
    state2 = SearchState(task=state.task, baseline=base, parent=base)
    again = get_search(SearchConfig(type=strategy, max_candidates=4, batch=4, patience=5), ListPolicy(names),
                       lambda c, _b: (logged[c.id], True), Hooks()).run(state2)
    assert again is not None and again[0].id == best[0].id


# ------------------------------------------------------------------------------ plausibility
def flags_of(speedup: float, best_speedup: float | None) -> list[str]:
    ev = SandboxedEvaluator()
    ev.config = EvalConfig()  # plausible_max_speedup 10
    t = TimingStats(baseline_s=[1.0], candidate_s=[1 / speedup], baseline_median_s=1.0, candidate_median_s=1 / speedup,
                    speedup=speedup, ci_low=speedup * 0.95, ci_high=speedup * 1.05, p_value=0.001, paired_low=speedup * 0.95)
    best = None if best_speedup is None else VerifiedBest(candidate=cand("best"), speedup=best_speedup, median_s=1 / best_speedup)
    return ev.timing_flags(t, best)


def test_plausibility_is_judged_against_the_verified_best() -> None:
    assert "implausible_speedup" not in flags_of(12.0, 10.0)  # within 2x of a verified 10x: no jump
    assert "implausible_speedup" in flags_of(30.0, 10.0)  # a jump
    assert "implausible_speedup" in flags_of(12.0, None)  # nothing verified yet: the absolute bound
    assert "implausible_speedup" not in flags_of(9.0, None)
    assert "implausible_speedup" in flags_of(12.0, 5.0)  # 12 > 2 x 5


# ------------------------------------------------------------------------------ the C evaluator's wiring
def spaced(source: str, k: int) -> str:
    """The same kernel under another id: k trailing blank lines."""
    return source + "\n" * k


class ScriptedTiming:
    """CFamilyEvaluator.time replaced: a scripted speedup against the baseline (by candidate id) and a scripted ratio
    against the best; what the real method is asked is recorded (label, against whom)."""

    def __init__(self, speedups: dict[str, float], pair_ratio: float) -> None:
        self.speedups, self.pair_ratio, self.asked = speedups, pair_ratio, []  # type: ignore[var-annotated]

    def __call__(self, candidate: Candidate, base: Path, prog: Path, rounds: int, label: str = "timing",
                 base_candidate: Candidate | None = None) -> TimingStats:
        self.asked.append((label, base_candidate.id if base_candidate else None))
        rng = random.Random(len(self.asked))
        if base_candidate is None:
            return stats.timing_stats(samples(rng, 1.0), samples(rng, 1.0 / self.speedups[candidate.id]))
        return stats.timing_stats(samples(rng, 1.0), samples(rng, 1.0 / self.pair_ratio))


@needs("gcc")
@pytest.mark.usefixtures("private_host_lock")
def test_the_evaluator_rechecks_jumps_only_and_times_a_near_candidate_against_the_best(
        small_evaluator: CFamilyEvaluator, monkeypatch: pytest.MonkeyPatch) -> None:
    ev = small_evaluator
    src = ev.task.baseline_source()
    best_c, c12, c30, c11 = (Candidate(files={ev.task.kernel: spaced(src, k)}) for k in (1, 2, 3, 4))
    best = VerifiedBest(candidate=best_c, speedup=10.0, median_s=0.1)
    script = ScriptedTiming({c12.id: 12.0, c30.id: 30.0, c11.id: 10.2}, pair_ratio=1.2)
    monkeypatch.setattr(ev, "time", script)

    r = ev.evaluate(c12, best)  # 12x after a verified 10x: no recheck; near the best: timed against it, and faster
    assert r.status == "ok", r.reason
    assert "implausible_speedup" not in r.flags and "rechecked" not in r.flags and "recheck" not in r.phase_s
    assert script.asked == [("timing", None), ("timing against the best", best_c.id)]
    assert r.vs_best is not None and r.vs_best.best_id == best_c.id and r.vs_best.replaces_best
    assert 1.1 < r.vs_best.ratio < 1.3 and "vs_best" in r.phase_s and "vs best: 1.2" in r.reason
    # the progress line: the time per call first, then the speedup, then the comparison with the best
    assert re.fullmatch(r"\d+(\.\d+)? ms, 1[12]\.\d\dx \[[\d.]+, [\d.]+\]; vs best: 1\.2\dx \[[\d.]+, [\d.]+\]", fmt_speedup(r))

    script.asked.clear()
    r = ev.evaluate(c30, best)  # a jump: rechecked, in a phase of its own
    assert r.status == "ok" and "implausible_speedup" in r.flags and "rechecked" in r.flags and "recheck" in r.phase_s
    assert [a[0] for a in script.asked][:2] == ["timing", "re-measuring (implausible or inconsistent)"]

    script.asked.clear()
    r = ev.evaluate(c12)  # no verified best: 12x is implausible, and nothing to compare with
    assert "rechecked" in r.flags and r.vs_best is None and [a[1] for a in script.asked] == [None, None]

    script.asked.clear()
    script.pair_ratio = 1.0  # as fast as the best: compared, and it does not replace it
    r = ev.evaluate(c11, best)
    assert r.vs_best is not None and not r.vs_best.replaces_best
    assert r.speedup is not None and r.speedup > 1.0 and r.faster
    best_result = EvalResult(candidate_id=best_c.id, status="ok",
                             timing=stats.timing_stats(samples(random.Random(0), 1.0), samples(random.Random(1), 0.1)))
    assert not is_better(r, (best_c, best_result))


@needs("gcc")
@pytest.mark.usefixtures("private_host_lock")
def test_a_real_program_timed_against_itself_under_another_id_is_not_faster(small_evaluator: CFamilyEvaluator) -> None:
    """End to end on small_gemm, local sandbox: the real interleaved timing, the best's program built and run with
    its own knobs. (A 5% faster program is not tested end to end: on this shared 2-core machine 5% is within the
    noise of one run; the synthetic test above covers it.)"""
    ev = small_evaluator
    src = spaced(ev.task.baseline_source(), 1)
    one, two = Candidate(files={ev.task.kernel: src}, idea="one"), Candidate(files={ev.task.kernel: spaced(src, 2)}, idea="two")
    r1 = ev.evaluate(one)
    assert r1.status == "ok" and r1.timing is not None, r1.reason
    best = VerifiedBest(candidate=one, speedup=r1.timing.speedup, median_s=r1.timing.candidate_median_s)
    result = EvalResult(candidate_id=two.id, status="ok")
    with ev.session():
        prog, _ = ev.build(two)
        ev._versus_best(two, prog, best, 5, result)
    assert "vs_best_failed" not in result.flags, result.reason
    vs = result.vs_best
    assert vs is not None and vs.best_id == one.id and not vs.replaces_best
    assert 0.67 < vs.ratio < 1.5 and vs.ci_low <= vs.ratio <= vs.ci_high
    assert vs.candidate_median_s > 0 and vs.best_median_s > 0 and result.phase_s["vs_best"] > 0


# ------------------------------------------------------------------------------ phases
def test_phase_sums_and_medians_per_phase() -> None:
    def r(**phases: float) -> EvalResult:
        return EvalResult(candidate_id="x", status="ok", phase_s=phases)

    got = phase_summary([r(wait=1.0, build=2.0, time=10.0), r(build=1.0, time=12.0, recheck=20.0, vs_best=11.0),
                         r(build=3.0, last=0.5)])
    assert list(got) == ["wait", "build", "time", "recheck", "vs_best", "last"]  # the order they run in
    assert got["build"] == {"total_s": 6.0, "median_s": 2.0, "candidates": 3}
    assert got["time"] == {"total_s": 22.0, "median_s": 11.0, "candidates": 2}
    assert got["recheck"]["total_s"] == 20.0 and got["vs_best"]["candidates"] == 1


def test_summary_sums_the_phases(tmp_path: Path) -> None:
    from kernopt.config import RunConfig
    from kernopt.optimize import make_summary

    task = load_task(SMALL_GEMM)
    history: list[tuple[Candidate, EvalResult]] = [
        (cand("a"), EvalResult(candidate_id="a", status="ok", phase_s={"build": 1.5, "time": 9.0, "vs_best": 8.0})),
        (cand("b"), EvalResult(candidate_id="b", status="compile_error", phase_s={"last": 0.25})),
    ]

    class Store:
        run_id, root = "r1", tmp_path

    s: dict[str, Any] = make_summary(Store(), task, RunConfig(task=str(SMALL_GEMM)), history, None, None, 20.0)  # type: ignore[arg-type]
    assert s["phases"]["build"]["total_s"] == 1.5 and s["phases"]["vs_best"]["total_s"] == 8.0
    assert s["phases"]["last"]["total_s"] == 0.25 and s["compared_with_best"] == 0
