"""Pydantic configs, one per component. `extra="forbid"`: a typo is an error, not a silent default."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EvalConfig(_Config):
    """How the evaluator verifies and times candidates (the task supplies sizes and tolerances)."""

    rounds: int | None = Field(None, ge=2, description="Interleaved timing rounds; None = the task's value. "
                               "Below 5 nothing can be significant (the 1% rank test runs on per-process medians).")
    reps: int | None = Field(None, ge=1, description="Timed calls per process; None = the task's value.")
    remeasure_rounds: int = Field(7, ge=2, description="Rounds when re-measuring the winner in a fresh sandbox.")
    race_check: bool = Field(True, description="Run the ThreadSanitizer race check on OpenMP candidates.")
    race_threads: list[int] = Field(default_factory=lambda: [2, 4], description="Thread counts for the -O1 race build.")
    race_threads_o0: list[int] = Field(default_factory=lambda: [3], description="Thread counts for a second race build at -O0.")
    early_stop_ratio: float = Field(1.5, gt=1, description="Stop timing after two rounds when the candidate is this much slower.")
    plausible_max_speedup: float = Field(10.0, gt=1, description="Speedups above this are flagged for review.")
    build_timeout_s: float = Field(60.0, gt=0, description="Wall clock for one compile or link.")
    verify_timeout_s: float = Field(30.0, gt=0, description="Wall clock for one correctness or race-check process.")
    memory_mb: int = Field(4096, ge=64, description="Address-space limit for candidate processes.")
    keep_workdirs: bool = Field(False, description="Keep build/run directories after evaluation (debugging).")


class SearchConfig(_Config):
    """Which search strategy runs, and its budget."""

    type: Literal["greedy", "best-of-n"] = Field("greedy", description="Search strategy.")
    max_candidates: int = Field(20, ge=1, description="Evaluations allowed (the baseline check is free).")
    max_wall_s: float | None = Field(None, gt=0, description="Stop starting new evaluations after this many seconds.")
    batch: int = Field(4, ge=1, description="Candidates proposed per step (greedy) or in total per round (best-of-n).")
    patience: int = Field(3, ge=1, description="Greedy: steps without a new best before stopping early.")
    seed: int = Field(0, description="Seed for any randomness in proposal order.")


class RunConfig(_Config):
    """Everything `kernopt optimize` needs; saved resolved as the run's config.json."""

    task: str = Field(description="Path of the task directory.")
    policy: Literal["tuner"] = Field("tuner", description="Who proposes candidates (llm arrives with its own issue).")
    sandbox: Literal["auto", "docker", "local"] = Field(
        "auto", description="Where candidates run: docker (a fresh container per step), local (process isolation), "
        "auto (docker when an engine answers, else an error; never a silent fallback to local).")
    search: SearchConfig = SearchConfig()
    eval: EvalConfig = EvalConfig()
    runs_dir: Path = Field(Path("runs"), description="Where run directories are created.")
