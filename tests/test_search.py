"""Search strategies with a scripted policy and scripted verdicts: budget, refinement, max-reward."""

from __future__ import annotations

from kernopt.agent.base import SearchState
from kernopt.agent.search import BestOfNSearch, GreedySearch, Hooks
from kernopt.candidate import Candidate
from kernopt.config import SearchConfig
from kernopt.evaluators.result import EvalResult, TimingStats
from kernopt.task import load_task
from tests.conftest import SMALL_GEMM


def verdict(c: Candidate, speedup: float | None, significant: bool = True) -> EvalResult:
    if speedup is None:
        return EvalResult(candidate_id=c.id, status="wrong_answer", reason="scripted")
    lo = speedup * 0.95 if significant else 0.9
    t = TimingStats(baseline_s=[1.0], candidate_s=[1 / speedup], baseline_median_s=1.0, candidate_median_s=1 / speedup,
                    speedup=speedup, ci_low=lo, ci_high=speedup * 1.05, p_value=0.001 if significant else 0.4,
                    paired_low=lo)
    return EvalResult(candidate_id=c.id, status="ok", timing=t)


class ChainPolicy:
    """Proposes 'parent + step k'; the scripted speed of a candidate is given by its idea."""

    name = "chain"

    def __init__(self) -> None:
        self.parents: list[str] = []

    def propose(self, state: SearchState, n: int) -> list[Candidate]:
        self.parents.append(state.parent.idea)
        out = []
        for k in range(50):
            c = Candidate(files={"kernel.c": f"{state.parent.files['kernel.c']}+{k}"}, idea=f"{state.parent.idea}/{k}",
                          parent=state.parent.id)
            if c.id not in state.seen:
                out.append(c)
            if len(out) == n:
                break
        return out


def speed_of(c: Candidate) -> float | None:
    steps = [int(s) for s in c.idea.split("/")[1:]]
    if steps and steps[-1] == 3:
        return None  # every fourth proposal is wrong
    return 1.0 + 0.1 * sum(1 for s in steps if s == 1)  # only step 1 helps, and it stacks


def make_state() -> SearchState:
    task = load_task(SMALL_GEMM)
    base = Candidate(files={"kernel.c": "base"}, idea="base", author="baseline")
    return SearchState(task=task, baseline=base, parent=base)


def run(search_cls: type, budget: int) -> tuple[GreedySearch | BestOfNSearch, ChainPolicy, SearchState]:
    policy = ChainPolicy()
    state = make_state()
    evaluated: list[str] = []

    def evaluate(c: Candidate) -> tuple[EvalResult, bool]:
        evaluated.append(c.id)
        s = speed_of(c)
        return verdict(c, s, significant=s is not None and s > 1.0), False

    search = search_cls(SearchConfig(max_candidates=budget, batch=4, patience=2), policy, evaluate, Hooks())
    search.run(state)
    assert len(evaluated) == len(set(evaluated)), "a candidate was evaluated twice"
    return search, policy, state


def test_greedy_refines_the_best_and_respects_the_budget() -> None:
    search, policy, state = run(GreedySearch, budget=10)
    assert search.used == 10 and len(state.history) == 10
    assert search.best is not None
    # batches of 4: step 1 becomes the best each round, and the next round refines it (speedups stack)
    assert search.best[0].idea == "base/1/1/1" and abs((search.best[1].speedup or 0) - 1.3) < 1e-9
    assert policy.parents == ["base", "base/1", "base/1/1"]


def test_greedy_stops_after_patience_without_improvement() -> None:
    search = GreedySearch(SearchConfig(max_candidates=1000, batch=4, patience=2), ChainPolicy(),
                          lambda c: (verdict(c, 1.0, significant=False), False), Hooks())
    assert search.run(make_state()) is None
    assert search.used == 8  # two batches without improvement, then stop


def test_best_of_n_stays_at_the_baseline() -> None:
    search, policy, state = run(BestOfNSearch, budget=8)
    assert set(policy.parents) == {"base"} and search.used == 8
    assert search.best is not None and search.best[0].idea == "base/1"


def test_not_significant_never_becomes_best() -> None:
    policy = ChainPolicy()
    state = make_state()
    search = GreedySearch(SearchConfig(max_candidates=6), policy,
                          lambda c: (verdict(c, 3.0, significant=False), False), Hooks())
    assert search.run(state) is None
