"""Search strategies with a scripted policy and scripted verdicts: budget, refinement, max-reward."""

from __future__ import annotations

import math
from typing import Any

import pytest

from kernopt.agent.base import SearchState
from kernopt.agent.search import (
    BeamSearch,
    BestOfNSearch,
    EvolveSearch,
    GreedySearch,
    Hooks,
    TreeSearch,
    _Base,
    get_search,
    normalize_source,
    program_key,
)
from kernopt.candidate import Candidate
from kernopt.config import SearchConfig
from kernopt.evaluators.result import EvalResult, TimingStats
from kernopt.model import ModelBudgetExhausted
from kernopt.task import load_task
from kernopt.tuner.policy import TunerPolicy
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

    def evaluate(c: Candidate, best: object = None) -> tuple[EvalResult, bool]:
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
                          lambda c, _best: (verdict(c, 1.0, significant=False), False), Hooks())
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
                          lambda c, _best: (verdict(c, 3.0, significant=False), False), Hooks())
    assert search.run(state) is None


def test_greedy_builds_on_a_promising_unproven_candidate() -> None:
    """Each step 1 alone is 1.3x over its parent but not proven; two stacked (1.69x) are. Without building on the
    unproven one, greedy would refine the baseline forever and never find the proven pair."""
    policy = ChainPolicy()
    state = make_state()
    messages: list[str] = []

    class Record(Hooks):
        def on_message(self, text: str) -> None:
            messages.append(text)

    def evaluate(c: Candidate, best: object = None) -> tuple[EvalResult, bool]:
        ones = sum(1 for s in c.idea.split("/")[1:] if s == "1")
        return verdict(c, 1.3 ** ones, significant=ones >= 2), False

    search = GreedySearch(SearchConfig(max_candidates=12, batch=4, patience=3), policy, evaluate, Record())
    best = search.run(state)
    assert policy.parents[:2] == ["base", "base/1"]
    assert best is not None and best[0].idea.startswith("base/1/1") and best[1].faster
    assert any("builds on" in m and "not proven" in m for m in messages)
    # a candidate under LEAD x its parent is no lead: the next round refines the same parent
    flat = GreedySearch(SearchConfig(max_candidates=8, batch=4, patience=2), ChainPolicy(),
                        lambda c, _best: (verdict(c, 1.04, significant=False), False), Hooks())
    flat_state = make_state()
    flat.run(flat_state)
    assert {c.parent for c, _ in flat_state.history} == {flat_state.baseline.id}


# ---------------------------------------------------------------- beam, tree, evolve, value reranking, budgets


GAIN = {0: 0.02, 1: 0.10, 2: -0.05}  # log-speedup each step adds (later steps: 0.01); step 3 is a wrong answer


def landscape(c: Candidate) -> float | None:
    """The synthetic speedup of a ChainPolicy candidate: the product of its steps' gains."""
    steps = [int(s) for s in c.idea.split("/")[1:]]
    if 3 in steps:
        return None
    return math.exp(sum(GAIN.get(s, 0.01) for s in steps))


class RecordingPolicy(ChainPolicy):
    """ChainPolicy that records (parent, n, history length) per call, and may raise the model's budget."""

    def __init__(self, max_per_call: int = 50, broke_at_call: int | None = None) -> None:
        super().__init__()
        self.calls: list[tuple[Candidate, int, int]] = []
        self.max_per_call, self.broke_at_call = max_per_call, broke_at_call

    def propose(self, state: SearchState, n: int) -> list[Candidate]:
        if self.broke_at_call is not None and len(self.calls) + 1 == self.broke_at_call:
            raise ModelBudgetExhausted("USD limit of $0.50 reached")
        self.calls.append((state.parent, n, len(state.history)))
        return super().propose(state, min(n, self.max_per_call))


class Messages(Hooks):
    def __init__(self) -> None:
        self.messages: list[str] = []

    def on_message(self, text: str) -> None:
        self.messages.append(text)


class FakeValue:
    """Scores by a function of the idea; records what it was asked and with which state.parent."""

    name = "fake"

    def __init__(self, fn: Any, broke_at_call: int | None = None) -> None:
        self.fn, self.broke_at_call = fn, broke_at_call
        self.calls: list[tuple[str, list[str]]] = []

    def score(self, state: SearchState, candidates: list[Candidate]) -> list[float]:
        if self.broke_at_call is not None and len(self.calls) + 1 == self.broke_at_call:
            raise ModelBudgetExhausted("token limit reached")
        self.calls.append((state.parent.id, [c.id for c in candidates]))
        return [self.fn(c) for c in candidates]


def search_on_landscape(type_: str, budget: int, policy: ChainPolicy | None = None, value: Any = None,
                        **config: Any) -> tuple[_Base, Any, SearchState, Messages, list[tuple[str, dict[str, Any]]]]:
    policy = policy or RecordingPolicy()
    events: list[tuple[str, dict[str, Any]]] = []
    state = make_state()
    state.log = lambda type_, **fields: events.append((type_, fields))
    evaluated: list[str] = []

    def evaluate(c: Candidate, best: object = None) -> tuple[EvalResult, bool]:
        evaluated.append(c.id)
        s = landscape(c)
        return verdict(c, s, significant=s is not None and s > 1.0), False

    hooks = Messages()
    search = get_search(SearchConfig(type=type_, max_candidates=budget, **config), policy, evaluate, hooks, value)
    search.run(state)
    assert len(evaluated) == len(set(evaluated)), "a candidate was evaluated twice"
    assert [c.id for c, _ in state.history] == evaluated
    return search, policy, state, hooks, events


def true_best(state: SearchState) -> str | None:
    """The first evaluated among the significantly faster candidates with the highest speedup."""
    best: tuple[float, str] | None = None
    for c, r in state.history:
        if r.faster and (best is None or (r.speedup or 0.0) > best[0]):
            best = (r.speedup or 0.0, c.id)
    return best[1] if best else None


def reward_pool(state: SearchState, upto: int) -> dict[str, float]:
    """The baseline (0) and every verified candidate among the first `upto` evaluated, with its reward."""
    return {state.baseline.id: 0.0, **{c.id: r.reward for c, r in state.history[:upto] if r.status == "ok"}}


@pytest.mark.parametrize("type_", ["greedy", "best-of-n", "beam", "tree", "evolve"])
@pytest.mark.parametrize("budget", [1, 7, 13])
def test_every_strategy_uses_the_budget_exactly_and_returns_the_true_best(type_: str, budget: int) -> None:
    search, _, state, hooks, _ = search_on_landscape(type_, budget, batch=4, patience=100)
    assert search.used == budget and len(state.history) == budget
    assert (search.best[0].id if search.best else None) == true_best(state)
    assert hooks.messages[-1] == f"candidate budget of {budget} used"


def test_get_search_picks_each_strategy_by_name() -> None:
    names = {"greedy": GreedySearch, "best-of-n": BestOfNSearch, "beam": BeamSearch, "tree": TreeSearch, "evolve": EvolveSearch}
    for name, cls in names.items():
        assert type(get_search(SearchConfig(type=name), ChainPolicy(), lambda c, _best: (verdict(c, 1.0), False), Hooks())) is cls


def test_beam_expands_the_best_width_candidates_and_spreads_the_batch() -> None:
    search, policy, state, _, _ = search_on_landscape("beam", 24, batch=5, beam_width=2)
    rounds: dict[int, list[tuple[Candidate, int]]] = {}
    for parent, n, seen in policy.calls:
        rounds.setdefault(seen, []).append((parent, n))
    assert [[p.id for p, _ in r] for r in rounds.values()][0] == [state.baseline.id]  # only the baseline at first
    assert list(rounds.values())[0][0][1] == 5
    for seen, calls in list(rounds.items())[1:]:
        pool = reward_pool(state, seen)
        parents = [p.id for p, _ in calls]
        assert len(parents) == 2 and len(set(parents)) == 2  # the beam keeps its width
        assert min(pool[p] for p in parents) >= max(r for i, r in pool.items() if i not in parents)  # the best two
        assert pool[parents[0]] >= pool[parents[1]] and [n for _, n in calls] == [3, 2]  # the better one gets the odd child
    assert len(rounds) >= 5
    # it reached deeper than one step from the baseline: the beam moved to verified children
    assert search.best is not None and search.best[0].idea.count("/") >= 3


def test_beam_falls_back_to_the_baseline_while_nothing_is_verified() -> None:
    policy = RecordingPolicy()
    search = BeamSearch(SearchConfig(max_candidates=8, batch=4, beam_width=3), policy,
                        lambda c, _best: (verdict(c, None), False), Hooks())
    assert search.run(make_state()) is None
    assert {p.idea for p, _, _ in policy.calls} == {"base"} and search.used == 8


def tree_priority(state: SearchState, upto: int, scores: dict[str, float] | None = None) -> dict[str, float]:
    """The documented tree rule, computed independently: estimate + 0.1 / (1 + children)."""
    children: dict[str, int] = {}
    for c, _ in state.history[:upto]:
        children[c.parent or ""] = children.get(c.parent or "", 0) + 1
    pool = reward_pool(state, upto)
    est = {i: (scores.get(i, r) if scores is not None else r) for i, r in pool.items()}
    return {i: est[i] + 0.1 / (1 + children.get(i, 0)) for i in pool}


def test_tree_expands_the_node_with_the_highest_reward_plus_exploration_bonus() -> None:
    search, policy, state, _, _ = search_on_landscape("tree", 20, batch=4)
    assert [p.idea for p, _, _ in policy.calls[:3]] == ["base", "base/1", "base/1/1"]
    for parent, _, seen in policy.calls:
        prio = tree_priority(state, seen)
        assert prio[parent.id] == max(prio.values())


def test_tree_expands_the_node_the_value_model_rates_highest() -> None:
    # the value model likes step 2, which is actually slower: the tree follows the model, not the reward
    value = FakeValue(lambda c: 1.0 if c.idea.endswith("/2") else 0.0)
    search, policy, state, _, events = search_on_landscape("tree", 12, value=value, batch=4)
    assert [p.idea for p, _, _ in policy.calls[:2]] == ["base", "base/2"]
    for parent, _, seen in policy.calls:
        prio = tree_priority(state, seen, search.scores)
        assert prio[parent.id] == max(prio.values())
    assert all(t == "value" for t, _ in events) and len(events) == len(policy.calls)


def test_value_reranking_keeps_the_best_scored_and_logs_every_score() -> None:
    rank = {0: 1.0, 1: 3.0, 2: 2.0, 3: 0.0}  # by the last step of the idea
    value = FakeValue(lambda c: rank[int(c.idea.rsplit("/", 1)[1])])
    search, policy, state, _, events = search_on_landscape("greedy", 6, value=value, batch=4, keep=2, patience=10)
    assert len(events) == 3 and all(t == "value" for t, _ in events)
    for (_, fields), start in zip(events, (0, 2, 4), strict=True):
        assert len(fields["scores"]) == 4 and fields["model"] == "fake"
        ranked = sorted(fields["scores"], key=lambda i: -fields["scores"][i])
        assert fields["kept"] == ranked[:2] == [c.id for c, _ in state.history[start:start + 2]]
    assert [c.idea.rsplit("/", 1)[1] for c, _ in state.history] == ["1", "2"] * 3  # the two best-scored, best first
    assert search.used == 6


def test_value_scores_each_proposal_against_its_own_parent() -> None:
    value = FakeValue(lambda c: 0.0)
    _, policy, state, _, _ = search_on_landscape("beam", 12, value=value, batch=4, beam_width=2)
    by_id = {c.id: c for c, _ in state.history}
    for parent_id, ids in value.calls:
        assert {by_id[i].parent for i in ids if i in by_id} <= {parent_id}


def test_evolve_rejects_duplicate_programs_unevaluated() -> None:
    class SameProgram:
        """Always the same program, reformatted and with a fresh comment: a new id every time."""

        name = "same"
        calls = 0

        def propose(self, state: SearchState, n: int) -> list[Candidate]:
            out = []
            for _ in range(n):
                SameProgram.calls += 1
                text = f"int f(void)\n{{ /* try {self.calls} */\n   return  1; // done\n}}\n" + "\n" * (self.calls % 3)
                out.append(Candidate(files={"kernel.c": text}, idea=f"try {self.calls}", parent=state.parent.id))
            return out

    policy = SameProgram()
    evaluated: list[Candidate] = []
    hooks = Messages()

    def evaluate(c: Candidate, best: object = None) -> tuple[EvalResult, bool]:
        evaluated.append(c)
        return verdict(c, 1.2), False

    search = EvolveSearch(SearchConfig(type="evolve", max_candidates=20, batch=3, islands=2, population=3), policy, evaluate, hooks)
    state = make_state()
    assert search.run(state) is not None
    assert len(evaluated) == 1 and search.used == 1  # the first one; every other proposal was the same program
    assert search.rejected == SameProgram.calls - 1 > 10
    assert f"rejected {search.rejected} duplicate programs unevaluated" in hooks.messages


def test_program_key_ignores_formatting_and_comments_but_not_code_or_knobs() -> None:
    a = Candidate(files={"k.c": "#define N 4\nint f() { return N; } // x\n"})
    b = Candidate(files={"k.c": "/* doc */\n#define N 4\n\nint f()  {  return N; }\n"})
    assert a.id != b.id and program_key(a) == program_key(b)
    assert program_key(a) != program_key(a.model_copy(update={"threads": 2}))
    # a compiler's own build (the tuner's Polly build) of the same source is another program
    assert program_key(a) != program_key(a.model_copy(update={"toolchain": "polly"}))
    assert program_key(a) != program_key(Candidate(files={"k.c": "#define N 5\nint f() { return N; }\n"}))
    # a line break ends a directive: joining lines would change the program
    assert program_key(Candidate(files={"k.c": "#define N 4\nint x;"})) != program_key(Candidate(files={"k.c": "#define N 4 int x;"}))
    assert normalize_source('char *s = "a // b";  /* c */') == 'char *s = "a // b";'


def test_evolve_migrates_each_islands_best_to_the_next() -> None:
    snapshots: list[tuple[dict[str, Any], list[set[str]]]] = []
    search_holder: list[EvolveSearch] = []
    state = make_state()
    state.log = lambda t, **f: snapshots.append((f, [{c.id for _, c in isl} for isl in search_holder[0].islands])) if t == "migrate" else None

    def evaluate(c: Candidate, best: object = None) -> tuple[EvalResult, bool]:
        s = landscape(c)
        return verdict(c, s, significant=s is not None and s > 1.0), False

    search = EvolveSearch(SearchConfig(type="evolve", max_candidates=30, batch=2, islands=3, population=3), RecordingPolicy(),
                          evaluate, Hooks())
    search_holder.append(search)
    search.run(state)
    assert search.used == 30 and snapshots
    for fields, islands in snapshots:
        for move in fields["moves"]:
            assert move["to"] == (move["from"] + 1) % 3
            assert move["candidate"] in islands[move["to"]]
    assert all(len(isl) <= 3 for isl in search.islands)
    # migrants stay: at least two neighbouring islands share a member other than the baseline they all started from
    members = [{c.id for _, c in isl} - {state.baseline.id} for isl in search.islands]
    assert any(members[i] & members[(i + 1) % 3] for i in range(3))


def test_evolve_with_one_island_never_migrates() -> None:
    _, _, _, _, events = search_on_landscape("evolve", 20, batch=2, islands=1, population=4)
    assert not [e for e in events if e[0] == "migrate"]


@pytest.mark.parametrize("type_", ["greedy", "best-of-n", "beam", "tree", "evolve"])
def test_model_budget_mid_search_stops_cleanly_keeping_the_best(type_: str) -> None:
    policy = RecordingPolicy(max_per_call=3, broke_at_call=4)
    search, _, state, hooks, _ = search_on_landscape(type_, 100, policy=policy, batch=3, patience=100)
    assert len(policy.calls) == 3 and 0 < search.used <= 9
    assert hooks.messages[-1] == "model budget used: USD limit of $0.50 reached"
    assert search.best is not None and search.best[0].id == true_best(state)


def test_model_budget_in_the_value_model_stops_cleanly() -> None:
    value = FakeValue(lambda c: 0.0, broke_at_call=3)
    search, _, state, hooks, _ = search_on_landscape("tree", 100, value=value, batch=4)
    assert search.used == 8 and hooks.messages[-1] == "model budget used: token limit reached"
    assert search.best is not None and search.best[0].id == true_best(state)


@pytest.mark.parametrize("type_", ["beam", "tree", "evolve"])
def test_new_strategies_drive_the_offline_tuner(type_: str) -> None:
    state = make_state()
    base = Candidate(files={state.task.kernel: state.task.baseline_source()}, author="baseline", idea="baseline")
    state.baseline = state.parent = base
    evaluated: list[str] = []

    def evaluate(c: Candidate, best: object = None) -> tuple[EvalResult, bool]:
        evaluated.append(c.id)
        speed = 1.0 + 0.3 * ("parallel for" in c.files[state.task.kernel]) + 0.1 * ("-march=native" in c.cflags)
        return verdict(c, speed, significant=speed > 1.0), False

    search = get_search(SearchConfig(type=type_, max_candidates=10, batch=3), TunerPolicy(), evaluate, Hooks())
    best = search.run(state)
    assert search.used == 10 and len(set(evaluated)) == 10
    assert best is not None and best[0].id == true_best(state) and abs((best[1].speedup or 0) - 1.4) < 1e-9
