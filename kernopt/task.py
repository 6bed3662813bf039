"""Task directories: the `task.toml` model, its loader and its validator.

A C-family task is a directory with `task.toml`, one editable kernel source and a task-owned
harness (see docs/tasks.md). Loading never compiles anything; `kernopt task check` does that.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from kernopt.errors import TaskError

Target = Literal["openmp", "mpi", "mpi+openmp", "c", "cpp"]
TARGETS: tuple[str, ...] = ("openmp", "mpi", "mpi+openmp", "c", "cpp")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Sizes(_Strict):
    """Problem sizes. The harness maps a size n to its buffers."""

    check: list[int] = Field(min_length=1, description="Sizes every candidate is verified at (small, odd, edge).")
    random: tuple[int, int] = Field(description="Range [lo, hi] sizes are drawn from at evaluation time.")
    random_count: int = Field(2, ge=1, description="How many sizes to draw from `random` per evaluation.")
    timing: int = Field(gt=0, description="The size timed; baseline should take roughly 0.2-2 s.")
    race: int = Field(gt=0, description="Small size for the ThreadSanitizer race check.")

    @field_validator("check")
    @classmethod
    def _positive(cls, v: list[int]) -> list[int]:
        if any(n <= 0 for n in v):
            raise ValueError("all check sizes must be positive")
        return v

    @model_validator(mode="after")
    def _range(self) -> Sizes:
        lo, hi = self.random
        if not 0 < lo <= hi:
            raise ValueError("random must be [lo, hi] with 0 < lo <= hi")
        return self


class Verify(_Strict):
    """How correctness is checked."""

    seeds: int = Field(5, ge=5, description="Random seeds per size (at least 5).")
    threads: list[int] = Field(default_factory=lambda: [1, 2, 3, 4], description="OpenMP thread counts verified.")
    ranks: list[int] = Field(default_factory=lambda: [1, 2, 3, 4], description="MPI rank counts verified.")
    repeat: int = Field(1, ge=1, description="How often each thread/rank count is repeated.")
    rtol: float = Field(1e-9, ge=0, description="Elementwise relative tolerance.")
    atol: float = Field(1e-12, ge=0, description="Elementwise absolute tolerance.")
    norm_rtol: float = Field(1e-10, ge=0, description="Tolerance on ||out-ref|| / ||ref|| over the whole output.")
    allow_input_mutation: bool = Field(False, description="Whether the kernel may write its IN buffers.")
    allow_fast_math: bool = Field(False, description="Whether -ffast-math style flags may be proposed.")
    race_check: bool = Field(True, description="Run the ThreadSanitizer race check for OpenMP targets.")


class Timing(_Strict):
    """How baseline and candidate are timed (interleaved, same session)."""

    threads: int = Field(2, ge=1, description="Default OpenMP threads for timing.")
    ranks: int = Field(2, ge=1, description="Default MPI ranks for timing.")
    rounds: int | None = Field(None, ge=5, description="Interleaved baseline/candidate process pairs (the 1% rank test needs "
                               "at least 5); default 7 for MPI targets, whose processes vary more, else 5.")
    reps: int = Field(2, ge=1, description="Timed calls per process.")
    warmup: int = Field(1, ge=0, description="Untimed calls per process before the timed ones.")
    timeout_s: float = Field(60.0, gt=0, description="Wall-clock limit for one timing process.")


class Build(_Strict):
    """Compiler and flags, identical for baseline and candidate (a candidate may add its own)."""

    cc: str | None = Field(None, description="Compiler; default gcc/g++ or mpicc/mpicxx by target.")
    cflags: list[str] = Field(default_factory=lambda: ["-O3"], description="Flags for every object.")
    ldflags: list[str] = Field(default_factory=lambda: ["-lm"], description="Link flags.")


class Tunable(_Strict):
    """A knob the offline tuner may set, passed as -DNAME=value to the kernel's build."""

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    values: list[int | str] = Field(min_length=1)


class Task(_Strict):
    """A loaded task directory."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.+-]+$")
    target: Target
    description: str = Field(min_length=1)
    kernel: str = Field(description="The one editable kernel source (relative path).")
    functions: list[str] = Field(min_length=1, description="Global symbols the kernel defines: its signature.")
    signature: str = Field(description="The kernel's C signature, shown to people and models.")
    harness: str = Field("harness.c", description="The task-owned harness (not editable).")
    sizes: Sizes
    verify: Verify = Verify()
    timing: Timing = Timing()
    build: Build = Build()
    tunables: list[Tunable] = Field(default_factory=list)
    root: Path = Field(Path("."), exclude=True, description="The task directory (set by the loader).")

    @property
    def language(self) -> Literal["c", "cpp"]:
        return "cpp" if self.kernel.endswith((".cc", ".cpp", ".cxx")) else "c"

    @property
    def uses_openmp(self) -> bool:
        return self.target in ("openmp", "mpi+openmp")

    @property
    def uses_mpi(self) -> bool:
        return self.target in ("mpi", "mpi+openmp")

    @property
    def timing_rounds(self) -> int:
        """Interleaved timing rounds: the task's value, else 7 for MPI targets and 5 otherwise."""
        return self.timing.rounds or (7 if self.uses_mpi else 5)

    @property
    def editable(self) -> list[str]:
        return [self.kernel]

    def baseline_source(self) -> str:
        return (self.root / self.kernel).read_text()

    @property
    def compiler(self) -> str:
        if self.build.cc:
            return self.build.cc
        if self.uses_mpi:
            return "mpicxx" if self.language == "cpp" else "mpicc"
        return "g++" if self.language == "cpp" else "gcc"


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "task.toml"
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = "unknown key (typo?)"
    elif err["type"] == "missing":
        msg = "required key is missing"
    elif err["type"] == "literal_error" and err["loc"] == ("target",):
        msg = f"unknown target {err['input']!r}; expected one of {', '.join(TARGETS)}"
    return f"{where}: {msg}"


def load_task(path: str | Path) -> Task:
    """Load and statically validate a task directory. Raises TaskError with one precise line."""
    root = Path(path)
    if not root.exists():
        raise TaskError(f"{root}: no such task directory")
    if not root.is_dir():
        raise TaskError(f"{root}: not a directory (a task is a directory with task.toml)")
    toml_path = root / "task.toml"
    if not toml_path.is_file():
        raise TaskError(f"{root}: no task.toml here (see docs/tasks.md for the format)")
    try:
        raw = tomllib.loads(toml_path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise TaskError(f"{toml_path}: not valid TOML: {e}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise TaskError(f"{toml_path}: cannot read: {e}") from None
    if "root" in raw:
        raise TaskError(f"{toml_path}: root: unknown key (typo?)")
    try:
        task = Task.model_validate({**raw, "root": root.resolve()})
    except ValidationError as e:
        raise TaskError(f"{toml_path}: {_first_error(e)}") from None
    for label, rel in (("kernel", task.kernel), ("harness", task.harness)):
        p = root / rel
        if Path(rel).is_absolute() or ".." in Path(rel).parts:
            raise TaskError(f"{toml_path}: {label} = {rel!r} must be a path inside the task directory")
        if not p.is_file():
            raise TaskError(f"{toml_path}: {label} file {rel!r} does not exist")
    if task.kernel == task.harness:
        raise TaskError(f"{toml_path}: kernel and harness must be different files")
    if task.sizes.timing < max(task.sizes.check):
        raise TaskError(f"{toml_path}: sizes.timing ({task.sizes.timing}) is smaller than the largest check size")
    return task
