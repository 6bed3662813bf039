"""Search strategies: which proposals get evaluated, under one budget, maximizing the best verified reward.

The run's value is the best verified candidate ever seen (max-reward), not an average. A candidate
becomes the best only when it is verified and significantly faster than the baseline (its whole
confidence interval above 1) and proven faster than the previous best in paired timing (is_better).

Every strategy shares `_Base`: the candidate and wall-clock budget, the hooks, the evaluation, the
best so far, and the value-model step that reranks (and, with `keep`, prunes) proposals before they
cost an evaluation. Running out of candidates, wall time (BudgetExhausted) or model spend
(ModelBudgetExhausted) ends any strategy cleanly, keeping its best.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import time
from collections import Counter
from collections.abc import Callable
from typing import Protocol

from kernopt.agent.base import Policy, SearchState, ValueModel
from kernopt.candidate import Candidate
from kernopt.config import SearchConfig
from kernopt.evaluators.result import EvalResult, VerifiedBest
from kernopt.model import ModelBudgetExhausted

# evaluate(candidate, best) -> (result, cached): best is the search's verified best (None before there is one), which
# the evaluator times a candidate against when it may beat it (EvalResult.vs_best); cached is True when the run log
# already had the result (resume: its vs_best is the logged one, so the same decisions follow).
EvaluateFn = Callable[[Candidate, VerifiedBest | None], tuple[EvalResult, bool]]


class Hooks:
    """Progress callbacks. Empty by default; the CLI's display overrides them. The core never prints."""

    def on_eval_start(self, candidate: Candidate, index: int, budget: int) -> None: ...

    def on_eval_done(self, candidate: Candidate, result: EvalResult, cached: bool,
                     best: tuple[Candidate, EvalResult] | None) -> None: ...

    def on_message(self, text: str) -> None: ...

    def on_phase(self, text: str) -> None:
        """The phase of the evaluation in progress ("building", "waiting for the timing lock held by pid 42
        (timing gemm c0003) for 12 s", "timing round 2/5: ..."). May be called from a helper thread."""

    def on_estimate(self, per_candidate_s: float, text: str) -> None:
        """The run's estimated duration: seconds per candidate and the line that says it and what it is based on."""


class BudgetExhausted(Exception):
    """No new evaluation may start."""


def is_better(result: EvalResult, best: tuple[Candidate, EvalResult] | None) -> bool:
    """Whether a result replaces the best. It must be significantly faster than the baseline; the first such is the
    best. After that, two speedups from separate evaluations are not compared: each divides by its own timing of the
    baseline, and those were seen 20% apart on one gemm (three layouts at 34.1-34.3 ms per call read 24.4x, 23.0x
    and 20.2x). The evaluator times a candidate that may beat the best against the best's program in the same rounds
    (vs_best); it replaces the best only when that paired comparison is significant by the evaluator's own rule
    (bootstrap interval, rank test and paired bound all above 1). A comparison that could not be made
    (vs_best_failed) keeps the best. A result with no comparison falls back to comparing the speedups: from the C
    family that is a candidate not near the best (VerifiedBest.may_be_beaten: its interval's top below 0.9 x the
    best's speedup, so its speedup is lower too, and it keeps the best); otherwise an evaluator that never compares
    (the torch family) or a result logged before comparisons existed."""
    if not result.faster or result.speedup is None:
        return False
    if best is None:
        return True
    if result.vs_best is not None:
        return result.vs_best.best_id == best[0].id and result.vs_best.replaces_best
    if "vs_best_failed" in result.flags:
        return False
    return result.speedup > (best[1].speedup or 0.0)


LEAD = 1.05  # a verified candidate this much faster than its parent (point estimate) is worth building on


def promising(state: SearchState, round_: list[tuple[Candidate, EvalResult]]) -> tuple[Candidate, float] | None:
    """The round's verified candidate with the highest speedup when it is at least LEAD times its parent's and not
    flagged (timing inconsistent, machine busy), though not proven faster: greedy search builds the next round on it
    instead of the same parent again (issue 17: on a memory-bound kernel of several nests each single move measured
    1.2-1.4x, never significant alone, so nothing stacked). Only a search decision: the best is still only ever a
    significantly faster candidate. (candidate, its speedup), or None when no candidate of the round qualifies."""
    def speedup_of(cid: str | None) -> float:
        r = state.result_of(cid) if cid is not None and cid != state.baseline.id else None
        return r.speedup if r is not None and r.speedup is not None else 1.0

    leads = [(c, r.speedup) for c, r in round_ if r.status == "ok" and r.speedup is not None and r.timing is not None
             and r.timing.consistent and not r.timing.machine_busy and r.speedup >= LEAD * speedup_of(c.parent)]
    return max(leads, key=lambda cs: cs[1]) if leads else None


class Search(Protocol):
    def run(self, state: SearchState) -> tuple[Candidate, EvalResult] | None: ...


class _Base:
    def __init__(self, config: SearchConfig, policy: Policy, evaluate: EvaluateFn, hooks: Hooks,
                 value: ValueModel | None = None) -> None:
        self.config, self.policy, self._evaluate, self.hooks, self.value = config, policy, evaluate, hooks, value
        self.best: tuple[Candidate, EvalResult] | None = None
        self.used = 0
        self.scores: dict[str, float] = {}  # the value model's score of every proposal it ranked, by id
        self.stop_reason: str | None = None  # why the search ended when a budget ended it (for the summary)
        self._start = time.monotonic()

    def run(self, state: SearchState) -> tuple[Candidate, EvalResult] | None:
        try:
            self._search(state)
        except BudgetExhausted as e:
            self.stop_reason = str(e)
            self.hooks.on_message(self.stop_reason)
        except ModelBudgetExhausted as e:
            self.stop_reason = f"model budget used: {e}" if str(e) else "model budget used"
            self.hooks.on_message(self.stop_reason)
        finish = getattr(self.policy, "finish", None)
        if finish is not None:  # e.g. the LLM policy logs the planned ideas it never got to
            finish(state, self.stop_reason or "the search ended")
        return self.best

    def _search(self, state: SearchState) -> None:
        raise NotImplementedError

    def _check_budget(self) -> None:
        if self.used >= self.config.max_candidates:
            raise BudgetExhausted(f"candidate budget of {self.config.max_candidates} used")
        if self.config.max_wall_s and time.monotonic() - self._start > self.config.max_wall_s:
            raise BudgetExhausted(f"wall-clock budget of {self.config.max_wall_s:.0f}s used")

    def evaluate(self, state: SearchState, candidate: Candidate) -> bool:
        """Evaluate one candidate under the budget; returns True when it became the new best."""
        self._check_budget()
        self.hooks.on_eval_start(candidate, self.used + 1, self.config.max_candidates)
        result, cached = self._evaluate(candidate, self.verified_best())
        self.used += 1
        state.history.append((candidate, result))
        better = is_better(result, self.best)
        if better:
            self.best = (candidate, result)
        self.hooks.on_eval_done(candidate, result, cached, self.best)
        return better

    def verified_best(self) -> VerifiedBest | None:
        """The best as the evaluator is told of it: whom to time a candidate against, what plausibility is judged by."""
        return VerifiedBest.of(*self.best) if self.best is not None else None

    def propose(self, state: SearchState, parent: Candidate, n: int) -> list[Candidate]:
        """Up to n proposals refining `parent` (set as state.parent), none already evaluated, no id twice.
        Nothing is asked of the policy once no evaluation may start (an LLM policy's proposals cost money)."""
        self._check_budget()
        if self.value is None:  # every proposal would be evaluated: never pay for more than can be
            n = min(n, self.config.max_candidates - self.used)
        state.parent = parent
        state.budget_left = self.config.max_candidates - self.used
        seen = state.seen
        fresh: dict[str, Candidate] = {}
        for c in self.policy.propose(state, n):
            if c.id not in seen:
                fresh.setdefault(c.id, c)
        return list(fresh.values())

    def rank(self, state: SearchState, proposals: list[Candidate]) -> list[Candidate]:
        """With a value model: score the proposals (each against its own parent), log the scores, sort
        them best first and keep `config.keep` (None = all). Without one: the proposals as they came."""
        if self.value is None or not proposals:
            return proposals
        parents = {state.baseline.id: state.baseline, **{c.id: c for c, _ in state.history}, state.parent.id: state.parent}
        groups: dict[str | None, list[Candidate]] = {}
        for c in proposals:
            groups.setdefault(c.parent, []).append(c)
        scores: dict[str, float] = {}
        current = state.parent
        try:
            for parent_id, group in groups.items():
                state.parent = parents.get(parent_id or "", current)
                got = self.value.score(state, group)
                if len(got) != len(group):
                    raise ValueError(f"value model {self.value.name!r} returned {len(got)} scores for {len(group)} proposals")
                scores.update({c.id: float(s) if math.isfinite(s) else -math.inf for c, s in zip(group, got, strict=True)})
        finally:
            state.parent = current
        self.scores.update(scores)
        ranked = sorted(proposals, key=lambda c: -scores[c.id])  # stable: ties keep the policy's order
        kept = ranked[: self.config.keep]
        state.log("value", model=self.value.name, scores=scores, kept=[c.id for c in kept])
        return kept


class GreedySearch(_Base):
    """Greedy refinement: propose edits of the best so far; move to a new best as soon as one appears.

    With a sequential policy (`policy.sequential`, e.g. the LLM policy) and no value model, each
    proposal is asked for alone and evaluated before the next is asked for, against the best so far
    at that moment: a win is stacked on by the next proposal. A round is then `batch` such steps,
    and `patience` counts rounds without a new best, as in the batched form."""

    def _search(self, state: SearchState) -> None:
        if getattr(self.policy, "sequential", False) and self.value is None:
            self._search_sequential(state)
            return
        stalled = 0
        while stalled < self.config.patience:
            proposals = self.rank(state, self.propose(state, state.parent, self.config.batch))
            if not proposals:
                self.hooks.on_message("the policy has no new proposals")
                return
            improved = False
            before = len(state.history)
            for c in proposals:
                improved |= self.evaluate(state, c)
            if improved and self.best is not None:
                state.parent = self.best[0]
                stalled = 0
                continue
            stalled += 1
            lead = promising(state, state.history[before:])
            if lead is not None and stalled < self.config.patience:
                self.hooks.on_message(f"no proven gain this round: the next builds on {lead[0].id[:12]} "
                                      f"({lead[1]:.2f}x, not proven; it cannot become the best as it is)")
                state.parent = lead[0]
        self.hooks.on_message(f"no improvement in {self.config.patience} rounds; stopping")

    def _search_sequential(self, state: SearchState) -> None:
        stalled = 0
        while stalled < self.config.patience:
            improved = False
            for _ in range(self.config.batch):
                proposals = self.propose(state, state.parent, 1)
                if not proposals:
                    self.hooks.on_message("the policy has no new proposals")
                    return
                for c in proposals:
                    if self.evaluate(state, c) and self.best is not None:
                        improved = True
                        state.parent = self.best[0]
            stalled = 0 if improved else stalled + 1
        self.hooks.on_message(f"no improvement in {self.config.patience} rounds; stopping")


class BestOfNSearch(_Base):
    """Best-of-n: n independent proposals from the baseline; keep the best verified one."""

    def _search(self, state: SearchState) -> None:
        while True:
            proposals = self.rank(state, self.propose(state, state.baseline, self.config.max_candidates - self.used))
            if not proposals:
                self.hooks.on_message("the policy has no new proposals")
                return
            for c in proposals:
                self.evaluate(state, c)


def _ok_nodes(state: SearchState) -> list[tuple[float, Candidate]]:
    """The baseline (reward 0: speedup 1) and every verified (status ok) candidate, with its reward."""
    return [(0.0, state.baseline)] + [(r.reward, c) for c, r in state.history if r.status == "ok"]


class BeamSearch(_Base):
    """Beam: each round expands the `beam_width` best verified candidates so far (the baseline counts,
    with reward 0, so it is the beam until something verified beats it), `batch` children spread over
    them (the better parents get the odd ones), all children reranked together by the value model.
    A parent whose proposals run out leaves the beam for the next best."""

    def _search(self, state: SearchState) -> None:
        exhausted: set[str] = set()
        while True:
            pool = [(r, c) for r, c in _ok_nodes(state) if c.id not in exhausted]
            beam = [c for _, c in sorted(pool, key=lambda rc: -rc[0])[: self.config.beam_width]]
            if not beam:
                self.hooks.on_message("the policy has no new proposals")
                return
            children: dict[str, Candidate] = {}
            for i, parent in enumerate(beam):
                share = self.config.batch // len(beam) + (1 if i < self.config.batch % len(beam) else 0)
                if share == 0:
                    continue
                got = self.propose(state, parent, share)
                if not got:
                    exhausted.add(parent.id)
                for c in got:
                    children.setdefault(c.id, c)
            for c in self.rank(state, list(children.values())):
                self.evaluate(state, c)


class TreeSearch(_Base):
    """Tree: the nodes are the baseline and every verified candidate; each step expands the node with
    the highest estimated reward-to-go with `batch` proposals.

    priority(node) = estimate(node) + EXPLORATION / (1 + children(node)), where estimate is the value
    model's score of the node (the score it got as a proposal) when a value model is set, and the
    node's own reward (log speedup) otherwise; the baseline, never a proposal, is estimated by its
    reward, 0. children counts the node's evaluated children, so an expanded node gives way to
    unexplored ones unless it is clearly better. Ties go to the older node. A node the policy has
    nothing more for is closed.
    """

    EXPLORATION = 0.1  # in reward units: worth a ~10% speedup to a node with no children yet

    def _search(self, state: SearchState) -> None:
        nodes: dict[str, tuple[float, Candidate]] = {state.baseline.id: (0.0, state.baseline)}
        for r, c in _ok_nodes(state):  # a search started over a history (resume) keeps its tree
            nodes.setdefault(c.id, (r, c))
        children: Counter[str] = Counter()
        closed: set[str] = set()
        while True:
            open_ = [i for i in nodes if i not in closed]
            if not open_:
                self.hooks.on_message("the policy has no new proposals")
                return
            pick = max(open_, key=lambda i: self.priority(i, nodes[i][0], children[i]))  # max keeps the first of ties
            proposals = self.rank(state, self.propose(state, nodes[pick][1], self.config.batch))
            if not proposals:
                closed.add(pick)
                continue
            for c in proposals:
                self.evaluate(state, c)
                children[pick] += 1
                result = state.history[-1][1]
                if result.status == "ok":
                    nodes.setdefault(c.id, (result.reward, c))

    def priority(self, node_id: str, reward: float, n_children: int) -> float:
        estimate = self.scores.get(node_id, reward) if self.value is not None else reward
        return estimate + self.EXPLORATION / (1 + n_children)


_COMMENT_OR_STRING = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|/\*.*?\*/|//[^\n]*', re.S)


def normalize_source(text: str) -> str:
    """Comments removed (string literals kept), each line stripped with runs of blanks made one, blank
    lines dropped. Line breaks stay: they end preprocessor directives."""
    text = _COMMENT_OR_STRING.sub(lambda m: m.group(0) if m.group(0)[0] in "\"'" else " ", text)
    lines = (" ".join(line.split()) for line in text.splitlines())
    return "\n".join(line for line in lines if line)


def program_key(c: Candidate) -> str:
    """Hash of the normalized sources and every knob: two candidates with the same key run the same program."""
    key = {"files": {name: normalize_source(text) for name, text in sorted(c.files.items())}, **c.knobs()}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


class EvolveSearch(_Base):
    """Evolve: `islands` populations of up to `population` verified candidates, each seeded with the
    baseline. Step s works on island s mod islands: a parent picked by tournament (the fittest of
    TOURNAMENT members drawn at random, seeded by config.seed; fitness = reward), `batch` children
    proposed, duplicate programs (same `program_key` as anything evaluated or the baseline) rejected
    unevaluated, the rest reranked and evaluated; verified children join the island, replacing its
    worst member when full (only if fitter). Every MIGRATE_EVERY steps each island's best is copied to
    the next island (ring). Stops when 2 x islands x population steps in a row found nothing new."""

    TOURNAMENT = 3
    MIGRATE_EVERY = 4

    def _search(self, state: SearchState) -> None:
        rng = random.Random(self.config.seed)
        self.islands: list[list[tuple[float, Candidate]]] = [[(0.0, state.baseline)] for _ in range(self.config.islands)]
        self.rejected = 0
        seen = {program_key(state.baseline)} | {program_key(c) for c, _ in state.history}
        step = fruitless = 0
        try:
            while fruitless < 2 * self.config.islands * self.config.population:
                island = self.islands[step % len(self.islands)]
                contestants = rng.sample(island, min(self.TOURNAMENT, len(island)))
                parent = max(contestants, key=lambda fc: fc[0])[1]
                fresh: dict[str, Candidate] = {}
                dups = []
                for c in self.propose(state, parent, self.config.batch):
                    key = program_key(c)
                    if key in seen or key in fresh:
                        dups.append(c.id)
                    else:
                        fresh[key] = c
                if dups:
                    self.rejected += len(dups)
                    state.log("duplicates", parent=parent.id, ids=dups)
                kept = self.rank(state, list(fresh.values()))
                seen |= {program_key(c) for c in kept}
                for c in kept:
                    self.evaluate(state, c)
                    result = state.history[-1][1]
                    if result.status == "ok":
                        self._insert(island, result.reward, c)
                fruitless = 0 if kept else fruitless + 1
                step += 1
                if step % self.MIGRATE_EVERY == 0:
                    self._migrate(state)
            self.hooks.on_message("the policy has no new programs")
        finally:
            if self.rejected:
                self.hooks.on_message(f"rejected {self.rejected} duplicate programs unevaluated")

    def _insert(self, island: list[tuple[float, Candidate]], fitness: float, c: Candidate) -> bool:
        if any(m.id == c.id for _, m in island):
            return False
        if len(island) < self.config.population:
            island.append((fitness, c))
            return True
        worst = min(range(len(island)), key=lambda i: island[i][0])
        if fitness <= island[worst][0]:
            return False
        island[worst] = (fitness, c)
        return True

    def _migrate(self, state: SearchState) -> None:
        if len(self.islands) < 2:
            return
        bests = [max(island, key=lambda fc: fc[0]) for island in self.islands]
        moves = []
        for i, (fitness, c) in enumerate(bests):
            to = (i + 1) % len(self.islands)
            if self._insert(self.islands[to], fitness, c):
                moves.append({"from": i, "to": to, "candidate": c.id})
        if moves:
            state.log("migrate", moves=moves)


_SEARCHES: dict[str, type[_Base]] = {"greedy": GreedySearch, "best-of-n": BestOfNSearch, "beam": BeamSearch,
                                     "tree": TreeSearch, "evolve": EvolveSearch}


def get_search(config: SearchConfig, policy: Policy, evaluate: EvaluateFn, hooks: Hooks,
               value: ValueModel | None = None) -> _Base:
    """The strategy named by config.type; `value` (see kernopt.agent.value.get_value_model) reranks proposals."""
    return _SEARCHES[config.type](config, policy, evaluate, hooks, value)
