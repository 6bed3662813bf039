"""The Policy protocol and the state a policy sees."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from kernopt.candidate import Candidate
from kernopt.evaluators.result import EvalResult
from kernopt.task import Task


@dataclass
class SearchState:
    """Everything a policy may look at. Policies never run code and never touch files."""

    task: Task
    baseline: Candidate
    parent: Candidate = field(metadata={"doc": "The candidate to refine (the baseline at the start)."})
    history: list[tuple[Candidate, EvalResult]] = field(default_factory=list)
    cores: int = 2
    seed: int = 0

    @property
    def seen(self) -> set[str]:
        return {c.id for c, _ in self.history}

    def result_of(self, candidate_id: str) -> EvalResult | None:
        for c, r in self.history:
            if c.id == candidate_id:
                return r
        return None


class Policy(Protocol):
    """Proposes candidates. `propose` returns at most n candidates not yet in state.history."""

    name: str

    def propose(self, state: SearchState, n: int) -> list[Candidate]:
        ...
