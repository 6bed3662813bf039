"""A candidate: file contents plus build and run knobs. What policies propose and evaluators judge."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class Candidate(BaseModel):
    """One program to evaluate. Identity is the content hash of everything that affects the result."""

    model_config = ConfigDict(extra="forbid")

    files: dict[str, str] = Field(description="Editable file path (relative to the task) -> full contents.")
    cflags: list[str] = Field(default_factory=list, description="Extra compiler flags for the kernel object.")
    defines: dict[str, str] = Field(default_factory=dict, description="Tunables, passed as -DNAME=value.")
    threads: int | None = Field(None, description="OpenMP threads for timing; None = the task's default.")
    ranks: int | None = Field(None, description="MPI ranks for timing; None = the task's default.")
    bind: str | None = Field(None, description="Thread/rank binding: 'close', 'spread', 'none' (None = task default).")
    toolchain: Literal["polly"] | None = Field(
        None, description="Build the kernel object with a compiler's own loop optimizer instead of the task's compiler: "
                          "'polly' = clang -O3 -march=native with Polly's polyhedral optimizer and its parallel loops "
                          "(C/C++ CPU kernels without OpenMP pragmas of their own). None = the task's compiler.")
    parent: str | None = Field(None, description="Id of the candidate this was derived from.")
    idea: str = Field("", description="One line saying what this candidate changes.")
    author: str = Field("", description="Who proposed it: 'baseline', 'user', 'tuner', a model name.")

    @property
    def define_flags(self) -> list[str]:
        """The tunables as compiler flags, in a stable order."""
        return [f"-D{k}={v}" for k, v in sorted(self.defines.items())]

    def knobs(self) -> dict[str, Any]:
        """Every build and run knob (None = the task's default): the one list that ids, duplicate keys, diffs and
        prompts read. `toolchain` only when set, so every id and prompt from before that knob stays as it was."""
        out: dict[str, Any] = {"threads": self.threads, "ranks": self.ranks, "bind": self.bind,
                               "cflags": list(self.cflags), "defines": dict(self.defines)}
        if self.toolchain is not None:
            out["toolchain"] = self.toolchain
        return out

    @property
    def id(self) -> str:
        """Stable content hash: two candidates with the same program and knobs share an id."""
        key = {"files": dict(self.files), **self.knobs()}
        return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
