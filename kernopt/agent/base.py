"""The agent's interfaces: the state a policy sees, Policy, Critic (diagnoses an evaluation) and
ValueModel (estimates reward-to-go). Implementations are chosen by short name from the config."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from kernopt.candidate import Candidate
from kernopt.evaluators.result import EvalResult
from kernopt.task import AnyTask as Task


@dataclass
class SearchState:
    """Everything a policy may look at. Policies never run code and never touch files."""

    task: Task
    baseline: Candidate
    parent: Candidate = field(metadata={"doc": "The candidate to refine (the baseline at the start)."})
    history: list[tuple[Candidate, EvalResult]] = field(default_factory=list)
    cores: int = 2
    seed: int = 0
    critiques: dict[str, Critique] = field(default_factory=dict, metadata={"doc": "By candidate id, once made."})
    profile: Any = field(default=None, metadata={"doc": "The host's measured roofs (kernopt.hw.probe.HardwareProfile) or None."})
    budget_left: int | None = field(default=None, metadata={"doc": "Candidate evaluations left in the run (set by the search)."})
    baseline_report: str | None = field(default=None, metadata={"doc": "The baseline kernel's compiler report (EvalResult."
                                        "compiler_report's kind), made by the evaluator before the search; None where none is made."})
    # The run log: log(event_type, **fields) appends one event (prompts, critiques, scores). A no-op by default.
    log: Callable[..., None] = field(default=lambda *_a, **_k: None, repr=False)

    @property
    def seen(self) -> set[str]:
        return {c.id for c, _ in self.history}

    def result_of(self, candidate_id: str) -> EvalResult | None:
        for c, r in self.history:
            if c.id == candidate_id:
                return r
        return None


class Policy(Protocol):
    """Proposes candidates. `propose` returns at most n candidates not yet in state.history.

    A policy may also have `sequential = True` (the greedy search then asks it for one proposal at a
    time and evaluates each before asking for the next, so the next one can build on a new best) and
    `finish(state, reason)` (called once when the search ends, e.g. to log ideas it never used)."""

    name: str

    def propose(self, state: SearchState, n: int) -> list[Candidate]:
        ...


class Critique(BaseModel):
    """A diagnosis of one evaluation: what failed or what bounds performance, and what to try next."""

    model_config = ConfigDict(extra="forbid")

    candidate_id: str
    status: str = Field(description="The evaluation's status (ok, compile_error, wrong_answer, ...).")
    diagnosis: str = Field(description="What failed, or what bounds performance now.")
    bottleneck: str = Field("", description="compute, memory bandwidth, synchronization, load imbalance, communication, ...")
    next_ideas: list[str] = Field(default_factory=list, description="What to try next, most promising first.")


class Critic(Protocol):
    name: str

    def critique(self, state: SearchState, candidate: Candidate, result: EvalResult) -> Critique:
        ...


class ValueModel(Protocol):
    """Estimated reward-to-go of each proposal (higher = more promising), before it costs an evaluation."""

    name: str

    def score(self, state: SearchState, candidates: list[Candidate]) -> list[float]:
        ...
