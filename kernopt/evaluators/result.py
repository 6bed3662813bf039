"""EvalResult: the typed verdict on one candidate, exactly as the run log stores it."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# A candidate is faster only when the rank test's p-value is below this level (see stats.py).
SIGNIFICANCE = 0.01

Status = Literal["ok", "compile_error", "runtime_error", "timeout", "wrong_answer", "rejected", "infra_error"]

# Fixed rewards for failures (DESIGN.md: log(speedup) for verified candidates, penalties otherwise).
PENALTY: dict[str, float] = {
    "compile_error": -1.0,
    "runtime_error": -1.0,
    "timeout": -1.0,
    "wrong_answer": -1.5,
    "rejected": -2.0,
    "infra_error": 0.0,
}


class Verification(BaseModel):
    """The evidence behind a verdict: what was checked, and how."""

    model_config = ConfigDict(extra="forbid")

    sizes: list[int] = Field(default_factory=list, description="Sizes checked, including the ones drawn at random.")
    seeds: int = Field(0, description="Seeds per size.")
    threads: list[int] = Field(default_factory=list, description="OpenMP thread counts checked.")
    ranks: list[int] = Field(default_factory=list, description="MPI rank counts checked.")
    race_check: Literal["clean", "race", "unavailable", "skipped", "not_run"] = "not_run"
    race_detail: str = ""
    max_abs_err: float | None = None
    max_rel_norm_err: float | None = None
    timed_outputs_checked: bool = False


class TimingStats(BaseModel):
    """Interleaved timing of baseline and candidate in one session."""

    model_config = ConfigDict(extra="forbid")

    baseline_s: list[float]
    candidate_s: list[float]
    baseline_median_s: float
    candidate_median_s: float
    speedup: float = Field(description="median(baseline) / median(candidate).")
    ci_low: float
    ci_high: float
    p_value: float = Field(description="One-sided Mann-Whitney U on per-process medians: candidate faster than baseline.")
    paired_low: float | None = Field(None, description="99% one-sided lower bound of the speedup from the rounds' paired "
                                     "log ratios (None in runs logged before it existed).")
    consistent: bool = Field(True, description="In-process timings agree with the sandbox's wall clock.")
    threads: int | None = None
    ranks: int | None = None

    def describe(self) -> str:
        """One line: speedup, interval and verdict."""
        verdict = "faster" if self.significant else "not significantly faster"
        return f"{self.speedup:.2f}x [{self.ci_low:.2f}, {self.ci_high:.2f}] ({verdict})"

    @property
    def significant(self) -> bool:
        """Faster only when the whole bootstrap interval is above 1, the rank test agrees at the 1%
        level, the paired per-round bound is above 1, and the reported kernel times are consistent
        with the process wall clock."""
        return (self.ci_low > 1.0 and self.p_value < SIGNIFICANCE and self.paired_low is not None and self.paired_low > 1.0
                and self.consistent)


class EvalResult(BaseModel):
    """Why a candidate passed or failed, with the numbers behind it."""

    model_config = ConfigDict(extra="forbid")

    candidate_id: str
    status: Status
    reason: str = Field("", description="One line: what failed, or a summary of success.")
    log: str = Field("", description="Compiler/runtime/sanitizer output excerpt for the failure.")
    verification: Verification = Verification()
    timing: TimingStats | None = None
    flags: list[str] = Field(default_factory=list, description="Review flags, e.g. 'implausible_speedup'.")
    phase_s: dict[str, float] = Field(default_factory=dict, description="Wall seconds per phase (build, verify, race, time).")

    @property
    def speedup(self) -> float | None:
        return self.timing.speedup if (self.status == "ok" and self.timing) else None

    @property
    def faster(self) -> bool:
        return self.status == "ok" and self.timing is not None and self.timing.significant

    @property
    def reward(self) -> float:
        if self.status == "ok":
            return math.log(self.timing.speedup) if self.timing else 0.0
        return PENALTY[self.status]

    def summary(self) -> dict[str, object]:
        """The machine-readable view printed by `--json`."""
        return {
            "candidate_id": self.candidate_id,
            "status": self.status,
            "reason": self.reason,
            "speedup": self.speedup,
            "ci": [self.timing.ci_low, self.timing.ci_high] if self.speedup is not None and self.timing else None,
            "significant": self.faster,
            "flags": self.flags,
        }
