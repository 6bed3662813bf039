"""Search strategies: which proposals get evaluated, under one budget, maximizing the best verified reward.

The run's value is the best verified candidate ever seen (max-reward), not an average. A candidate
becomes the best only when it is verified and significantly faster (its whole confidence interval
above 1) and faster than the previous best.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from kernopt.agent.base import Policy, SearchState
from kernopt.candidate import Candidate
from kernopt.config import SearchConfig
from kernopt.evaluators.result import EvalResult

# evaluate(candidate) -> (result, cached): cached is True when the run log already had it (resume).
EvaluateFn = Callable[[Candidate], tuple[EvalResult, bool]]


class Hooks:
    """Progress callbacks. Empty by default; the CLI's display overrides them. The core never prints."""

    def on_eval_start(self, candidate: Candidate, index: int, budget: int) -> None: ...

    def on_eval_done(self, candidate: Candidate, result: EvalResult, cached: bool,
                     best: tuple[Candidate, EvalResult] | None) -> None: ...

    def on_message(self, text: str) -> None: ...


class BudgetExhausted(Exception):
    """No new evaluation may start."""


def is_better(result: EvalResult, best: tuple[Candidate, EvalResult] | None) -> bool:
    if not result.faster or result.speedup is None:
        return False
    return best is None or result.speedup > (best[1].speedup or 0.0)


class Search(Protocol):
    def run(self, state: SearchState) -> tuple[Candidate, EvalResult] | None: ...


class _Base:
    def __init__(self, config: SearchConfig, policy: Policy, evaluate: EvaluateFn, hooks: Hooks) -> None:
        self.config, self.policy, self._evaluate, self.hooks = config, policy, evaluate, hooks
        self.best: tuple[Candidate, EvalResult] | None = None
        self.used = 0
        self._start = time.monotonic()

    def _check_budget(self) -> None:
        if self.used >= self.config.max_candidates:
            raise BudgetExhausted(f"candidate budget of {self.config.max_candidates} used")
        if self.config.max_wall_s and time.monotonic() - self._start > self.config.max_wall_s:
            raise BudgetExhausted(f"wall-clock budget of {self.config.max_wall_s:.0f}s used")

    def evaluate(self, state: SearchState, candidate: Candidate) -> bool:
        """Evaluate one candidate under the budget; returns True when it became the new best."""
        self._check_budget()
        self.hooks.on_eval_start(candidate, self.used + 1, self.config.max_candidates)
        result, cached = self._evaluate(candidate)
        self.used += 1
        state.history.append((candidate, result))
        better = is_better(result, self.best)
        if better:
            self.best = (candidate, result)
        self.hooks.on_eval_done(candidate, result, cached, self.best)
        return better


class GreedySearch(_Base):
    """Greedy refinement: propose edits of the best so far; move to a new best as soon as one appears."""

    def run(self, state: SearchState) -> tuple[Candidate, EvalResult] | None:
        stalled = 0
        try:
            while stalled < self.config.patience:
                proposals = self.policy.propose(state, self.config.batch)
                if not proposals:
                    self.hooks.on_message("the policy has no new proposals")
                    break
                improved = False
                for c in proposals:
                    improved |= self.evaluate(state, c)
                if improved and self.best is not None:
                    state.parent = self.best[0]
                    stalled = 0
                else:
                    stalled += 1
            else:
                self.hooks.on_message(f"no improvement in {self.config.patience} rounds; stopping")
        except BudgetExhausted as e:
            self.hooks.on_message(str(e))
        return self.best


class BestOfNSearch(_Base):
    """Best-of-n: n independent proposals from the baseline; keep the best verified one."""

    def run(self, state: SearchState) -> tuple[Candidate, EvalResult] | None:
        state.parent = state.baseline
        try:
            while True:
                proposals = self.policy.propose(state, self.config.max_candidates - self.used)
                if not proposals:
                    self.hooks.on_message("the policy has no new proposals")
                    break
                for c in proposals:
                    self.evaluate(state, c)
        except BudgetExhausted as e:
            self.hooks.on_message(str(e))
        return self.best


def get_search(config: SearchConfig, policy: Policy, evaluate: EvaluateFn, hooks: Hooks) -> GreedySearch | BestOfNSearch:
    if config.type == "best-of-n":
        return BestOfNSearch(config, policy, evaluate, hooks)
    return GreedySearch(config, policy, evaluate, hooks)
