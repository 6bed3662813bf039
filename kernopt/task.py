"""Task directories: the `task.toml` models, their loader and validator.

Two families (see docs/tasks.md):
- C family (`Task`: openmp, mpi, mpi+openmp, c, cpp, cuda-c): one editable kernel source and a
  task-owned harness that the trusted driver links.
- Torch family (`TorchTask`: triton, cuda): a KernelBench-style `reference.py` (`Model`, `get_inputs`,
  `get_init_inputs`) and an editable `solution.py` whose `ModelNew` uses Triton kernels or CUDA
  through torch's inline extension loader.
Loading never compiles or imports anything; `kernopt task check` does that.
"""

from __future__ import annotations

import math
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from kernopt.errors import TaskError

if TYPE_CHECKING:
    import numpy as np

Target = Literal["openmp", "mpi", "mpi+openmp", "c", "cpp", "cuda-c"]
TorchTarget = Literal["triton", "cuda"]
C_TARGETS: tuple[str, ...] = ("openmp", "mpi", "mpi+openmp", "c", "cpp", "cuda-c")
TORCH_TARGETS: tuple[str, ...] = ("triton", "cuda")
TARGETS: tuple[str, ...] = C_TARGETS + TORCH_TARGETS


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


class OutputCheck(_Strict):
    """How one output buffer is compared (`[verify.outputs.NAME]`): its own tolerances (unset ones fall back
    to the task-wide ones in [verify]) and optionally only a part of it."""

    rtol: float | None = Field(None, ge=0, description="Elementwise relative tolerance of this output.")
    atol: float | None = Field(None, ge=0, description="Elementwise absolute tolerance of this output.")
    norm_rtol: float | None = Field(None, ge=0, description="Relative norm bound of this output.")
    range: tuple[str, str] | None = Field(None, description="[start, stop): compare only these elements; expressions of n "
                                          "(kernopt/hw/expr.py), rounded down and clamped to the buffer.")
    triangle: Literal["lower", "upper"] | None = Field(None, description="Compare only the lower (j <= i) or upper (j >= i) "
                                                       "triangle of the buffer as a row-major matrix of `cols` columns.")
    cols: str = Field("n", description="The row length of the matrix `triangle` reads the buffer as (an expression of n).")

    @field_validator("range")
    @classmethod
    def _range_formulas(cls, v: tuple[str, str] | None) -> tuple[str, str] | None:
        if v is not None:
            from kernopt.hw.expr import parse

            for text in v:
                parse(text, ["n"])
        return v

    @field_validator("cols")
    @classmethod
    def _cols_formula(cls, v: str) -> str:
        from kernopt.hw.expr import parse

        parse(v, ["n"])
        return v

    @model_validator(mode="after")
    def _one_part(self) -> OutputCheck:
        if self.range is not None and self.triangle is not None:
            raise ValueError("range and triangle: give one of them")
        return self

    def mask(self, n: int, size: int) -> slice | np.ndarray:
        """The compared elements of a buffer of `size` elements at size n: a slice, or a boolean mask (triangle)."""
        if self.triangle is None:
            start, stop = self.span(n, size)
            return slice(start, stop)
        import numpy as np

        from kernopt.hw.expr import evaluate

        cols = max(1, math.floor(evaluate(self.cols, {"n": float(n)})))
        i, j = np.divmod(np.arange(size, dtype=np.int64), cols)
        return (j <= i) if self.triangle == "lower" else (j >= i)

    def span(self, n: int, size: int) -> tuple[int, int]:
        """The compared elements [start, stop) of a buffer of `size` elements at size n."""
        if self.range is None:
            return 0, size
        from kernopt.hw.expr import evaluate

        start, stop = (min(size, max(0, math.floor(evaluate(t, {"n": float(n)})))) for t in self.range)
        return start, max(start, stop)


class Verify(_Strict):
    """How correctness is checked."""

    seeds: int = Field(5, ge=5, description="Random seeds per size (at least 5).")
    threads: list[int] = Field(default_factory=lambda: [1, 2, 3, 4], description="OpenMP thread counts verified.")
    ranks: list[int] = Field(default_factory=lambda: [1, 2, 3, 4], description="MPI rank counts verified.")
    repeat: int = Field(1, ge=1, description="How often each thread/rank count is repeated.")
    rtol: float = Field(1e-9, ge=0, description="Elementwise relative tolerance.")
    atol: float = Field(1e-12, ge=0, description="Elementwise absolute tolerance.")
    norm_rtol: float = Field(1e-10, ge=0, description="Tolerance on ||out-ref|| / ||ref|| over the whole output.")
    allow_input_mutation: bool = Field(False, description="Whether the kernel may write its IN buffers (all of them).")
    scratch: list[str] = Field(default_factory=list, description="IN buffers the kernel may overwrite (every other input is "
                               "still checked around every call).")
    allow_fast_math: bool = Field(False, description="Whether -ffast-math style flags may be proposed.")
    race_check: bool = Field(True, description="Run the ThreadSanitizer race check for OpenMP targets.")
    outputs: dict[str, OutputCheck] = Field(default_factory=dict, description="Per output buffer: tolerances and the part compared.")

    def tolerances(self, name: str) -> tuple[float, float, float]:
        """(rtol, atol, norm_rtol) of output `name`: its own where set, else the task-wide ones."""
        o = self.outputs.get(name)
        if o is None:
            return self.rtol, self.atol, self.norm_rtol
        return (self.rtol if o.rtol is None else o.rtol, self.atol if o.atol is None else o.atol,
                self.norm_rtol if o.norm_rtol is None else o.norm_rtol)

    def part(self, name: str, n: int | None, size: int) -> slice | np.ndarray:
        """What of output `name` is compared at size n, as an index for a flat array: a slice, or a boolean mask
        (a triangle). Everything when n is None or nothing is set."""
        o = self.outputs.get(name)
        return slice(0, size) if o is None or n is None else o.mask(n, size)


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

    cc: str | None = Field(None, description="Compiler; default gcc/g++, mpicc/mpicxx or nvcc by target.")
    cflags: list[str] = Field(default_factory=lambda: ["-O3"], description="Flags for every object.")
    ldflags: list[str] = Field(default_factory=lambda: ["-lm"], description="Link flags.")
    arch: str = Field("sm_90", pattern=r"^sm_[0-9]+a?$", description="cuda-c: the GPU architecture nvcc compiles for "
                      "when no GPU is present (on a GPU machine, the GPU's own).")


MAX_MEMORY_MB = 65536  # the most a task may ask for (64 GiB); the monitor refuses buffer tables larger than this too


class TaskLimits(_Strict):
    """Resource limits of the task's programs (baseline and candidates alike)."""

    memory_mb: int | None = Field(None, ge=64, le=MAX_MEMORY_MB, description="Address-space limit of every run of the "
                                  "measured program in MiB, where the task needs more than the default (eval.memory_mb, "
                                  f"4096); at most {MAX_MEMORY_MB}.")


class Tunable(_Strict):
    """A knob the offline tuner may set, passed as -DNAME=value to the kernel's build."""

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    values: list[int | str] = Field(min_length=1)


class RooflineSpec(_Strict):
    """The work of one kernel call at size n, for the roofline figures (docs/tasks.md, docs/roofline.md):
    arithmetic expressions of `n` and of the table's `params` (see kernopt/hw/expr.py)."""

    params: dict[str, float] = Field(default_factory=dict, description="Named constants the formulas use (the kernel's "
                                     "fixed parameters: time steps, right-hand sides, ...).")
    flops: str = Field(description="Floating-point operations of one call, e.g. \"2*n^3\".")
    bytes: str = Field(description="Compulsory memory traffic of one call in bytes, e.g. \"3*8*n^2\".")

    @field_validator("params")
    @classmethod
    def _param_names(cls, v: dict[str, float]) -> dict[str, float]:
        for name, value in v.items():
            if not name.isidentifier() or name == "n":
                raise ValueError(f"parameter name {name!r} must be an identifier other than n")
            if not math.isfinite(value):
                raise ValueError(f"parameter {name} = {value} is not finite")
        return v

    @field_validator("flops", "bytes")
    @classmethod
    def _formula(cls, v: str, info: ValidationInfo) -> str:
        from kernopt.hw.expr import parse

        parse(v, ["n", *info.data.get("params", {})])  # ExprError is a ValueError: pydantic reports it with the key
        return v

    def work(self, n: int) -> tuple[float, float]:
        """(flops, bytes) of one call at size n."""
        from kernopt.hw.expr import evaluate

        values = {**self.params, "n": float(n)}
        return evaluate(self.flops, values), evaluate(self.bytes, values)


class Task(_Strict):
    """A loaded C-family task directory."""

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
    limits: TaskLimits = TaskLimits()
    roofline: RooflineSpec | None = Field(None, description="The work at size n, for roofline figures (optional).")
    root: Path = Field(Path("."), exclude=True, description="The task directory (set by the loader).")

    family: ClassVar[str] = "c"

    @property
    def language(self) -> Literal["c", "cpp", "cuda"]:
        if self.kernel.endswith(".cu"):
            return "cuda"
        return "cpp" if self.kernel.endswith((".cc", ".cpp", ".cxx")) else "c"

    @property
    def uses_gpu(self) -> bool:
        return self.target == "cuda-c"

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
        if self.target == "cuda-c":
            return "nvcc"
        if self.uses_mpi:
            return "mpicxx" if self.language == "cpp" else "mpicc"
        return "g++" if self.language == "cpp" else "gcc"


# ---------------------------------------------------------------- torch family
Shape = dict[str, int]


class Shapes(_Strict):
    """Problem shapes of a torch-family task. A shape gives values to `vars`, module-level integers of
    reference.py that `get_inputs()` (and `get_init_inputs()`) read; the trusted runner sets them on the
    reference module before building inputs, exactly as KernelBench files are written."""

    vars: list[str] = Field(min_length=1, description="Module-level ints of reference.py that set the problem shape.")
    check: list[Shape] = Field(min_length=1, description="Shapes every candidate is verified at (small, odd, edge).")
    random: dict[str, tuple[int, int]] = Field(default_factory=dict, description="var -> [lo, hi]: drawn at evaluation "
                                               "time; the other vars keep the first check shape's values.")
    random_count: int = Field(2, ge=0, description="How many shapes to draw from `random` per evaluation.")
    timing: Shape = Field(default_factory=dict, description="The shape timed on a GPU; vars left out keep reference.py's values.")

    @model_validator(mode="after")
    def _consistent(self) -> Shapes:
        known = set(self.vars)
        for shape in [*self.check, self.timing]:
            unknown = set(shape) - known
            if unknown:
                raise ValueError(f"shape {shape} sets {sorted(unknown)[0]!r}, which is not in shapes.vars")
            if any(v <= 0 for v in shape.values()):
                raise ValueError(f"shape {shape}: values must be positive")
        for shape in self.check:
            if set(shape) != known:
                raise ValueError(f"check shape {shape} must set every var in shapes.vars ({', '.join(self.vars)})")
        for var, (lo, hi) in self.random.items():
            if var not in known:
                raise ValueError(f"random sets {var!r}, which is not in shapes.vars")
            if not 0 < lo <= hi:
                raise ValueError(f"random.{var} must be [lo, hi] with 0 < lo <= hi")
        return self

    def draw(self, rng: object) -> list[Shape]:
        """`random_count` shapes drawn with `rng` (a random.Random-like object with randint)."""
        out = []
        for _ in range(self.random_count if self.random else 0):
            shape = dict(self.check[0])
            shape.update({var: rng.randint(lo, hi) for var, (lo, hi) in self.random.items()})  # type: ignore[attr-defined]
            out.append(shape)
        return out


class Tolerance(_Strict):
    rtol: float = Field(ge=0)
    atol: float = Field(ge=0)


def _default_tolerances() -> dict[str, Tolerance]:
    return {"float64": Tolerance(rtol=1e-7, atol=1e-9), "float32": Tolerance(rtol=1e-4, atol=1e-5),
            "float16": Tolerance(rtol=1e-2, atol=1e-3), "bfloat16": Tolerance(rtol=2e-2, atol=1e-2)}


class TorchVerify(_Strict):
    """How torch-family candidates are checked."""

    seeds: int = Field(5, ge=5, description="Random seeds per shape (at least 5).")
    tolerances: dict[str, Tolerance] = Field(default_factory=_default_tolerances,
                                             description="Per output dtype: elementwise rtol/atol (integer and bool outputs must match exactly).")
    norm_rtol: float | None = Field(None, ge=0, description="Bound on ||out-ref|| / ||ref|| per output; None = the dtype's rtol.")
    allow_input_mutation: bool = Field(False, description="Whether ModelNew.forward may write its inputs.")
    allow_torch_ops: list[str] = Field(default_factory=list, description="aten ops the reference uses that candidates may "
                                       "still call (e.g. 'aten.mm' where only the epilogue is the task).")

    @field_validator("tolerances")
    @classmethod
    def _merge_defaults(cls, v: dict[str, Tolerance]) -> dict[str, Tolerance]:
        """A task that sets float32 keeps the defaults for the other float dtypes (not exact matching)."""
        return {**_default_tolerances(), **v}

    def tolerance(self, dtype: str) -> Tolerance | None:
        """The tolerance for an output dtype name ('float32', 'torch.float32'); None = exact match."""
        return self.tolerances.get(dtype.removeprefix("torch."))


class TorchTiming(_Strict):
    """GPU timing: device events, L2 flush, rotated inputs, interleaved processes."""

    rounds: int = Field(5, ge=5, description="Interleaved baseline/candidate process pairs.")
    reps: int = Field(20, ge=1, description="Timed calls per process.")
    warmup: int = Field(3, ge=0, description="Untimed calls per process before the timed ones.")
    rotate: int = Field(4, ge=1, description="Input sets cycled through so repeated calls do not measure the cache.")
    flush_l2: bool = Field(True, description="Overwrite a buffer larger than L2 before every timed call.")
    compare_eager: bool = Field(True, description="Also time the reference in eager PyTorch.")
    compare_compile: bool = Field(True, description="Also time torch.compile of the reference (where it works).")
    timeout_s: float = Field(300.0, gt=0, description="Wall-clock limit for one timing process (includes extension builds).")


class TorchBuild(_Strict):
    """Where and for what CUDA code is compiled."""

    arch: str = Field("sm_90", pattern=r"^sm_[0-9]+a?$", description="GPU architecture nvcc compiles for when no GPU is present.")
    timeout_s: float = Field(600.0, gt=0, description="Wall clock for building a candidate's CUDA extension.")


class TorchTask(_Strict):
    """A loaded torch-family task directory (KernelBench-compatible)."""

    family: ClassVar[str] = "torch"

    name: str = Field(pattern=r"^[A-Za-z0-9_.+-]+$")
    target: TorchTarget
    description: str = Field(min_length=1)
    kernel: str = Field("solution.py", description="The editable file; defines ModelNew.")
    reference: str = Field("reference.py", description="KernelBench-style Model, get_inputs, get_init_inputs (not editable).")
    shapes: Shapes
    verify: TorchVerify = TorchVerify()
    timing: TorchTiming = TorchTiming()
    build: TorchBuild = TorchBuild()
    tunables: list[Tunable] = Field(default_factory=list)
    root: Path = Field(Path("."), exclude=True, description="The task directory (set by the loader).")

    uses_openmp: ClassVar[bool] = False
    uses_mpi: ClassVar[bool] = False
    uses_gpu: ClassVar[bool] = True
    language: ClassVar[str] = "python"

    @property
    def editable(self) -> list[str]:
        return [self.kernel]

    @property
    def functions(self) -> list[str]:
        return ["ModelNew"]

    @property
    def signature(self) -> str:
        return "class ModelNew(torch.nn.Module): same constructor arguments and forward() inputs/outputs as Model in " + self.reference

    def baseline_source(self) -> str:
        return (self.root / self.kernel).read_text()

    def reference_source(self) -> str:
        return (self.root / self.reference).read_text()


AnyTask = Task | TorchTask


def _first_error(exc: ValidationError) -> str:
    errors = exc.errors()
    # A misspelt key is two errors (the unknown key, and the key it misspells is missing): name the typo.
    err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    where = ".".join(str(p) for p in err["loc"]) or "task.toml"
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        import difflib

        missing = [str(e["loc"][-1]) for e in errors if e["type"] == "missing" and e["loc"][:-1] == err["loc"][:-1]]
        close = difflib.get_close_matches(str(err["loc"][-1]), missing, n=1)
        msg = f"unknown key (typo? did you mean {close[0]!r}?)" if close else "unknown key (typo?)"
    elif err["type"] == "missing":
        msg = "required key is missing"
    elif err["type"] == "literal_error" and err["loc"] == ("target",):
        msg = f"unknown target {err['input']!r}; expected one of {', '.join(TARGETS)}"
    return f"{where}: {msg}"


def load_task(path: str | Path) -> AnyTask:
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
    target = raw.get("target")
    if target in TORCH_TARGETS:
        return _load_torch_task(raw, root, toml_path)
    try:
        task = Task.model_validate({**raw, "root": root.resolve()})
    except ValidationError as e:
        raise TaskError(f"{toml_path}: {_first_error(e)}") from None
    _check_files(toml_path, root, (("kernel", task.kernel), ("harness", task.harness)))
    if task.kernel == task.harness:
        raise TaskError(f"{toml_path}: kernel and harness must be different files")
    if task.sizes.timing < max(task.sizes.check):
        raise TaskError(f"{toml_path}: sizes.timing ({task.sizes.timing}) is smaller than the largest check size")
    if task.roofline is not None:
        _check_roofline(toml_path, task.roofline, task.sizes.timing)
    return task


def _check_roofline(toml_path: Path, spec: RooflineSpec, n: int) -> None:
    """The formulas give finite, non-negative work at the timing size, and not none at all."""
    from kernopt.hw.expr import ExprError, evaluate

    values = {**spec.params, "n": float(n)}
    got = {}
    for key in ("flops", "bytes"):
        try:
            got[key] = evaluate(getattr(spec, key), values)
        except ExprError as e:
            raise TaskError(f"{toml_path}: roofline.{key}: {e} at the timing size n={n}") from None
        if got[key] < 0:
            raise TaskError(f"{toml_path}: roofline.{key}: {getattr(spec, key).strip()!r} is negative ({got[key]:g}) "
                            f"at the timing size n={n}")
    if got["flops"] == 0 and got["bytes"] == 0:
        raise TaskError(f"{toml_path}: roofline: flops and bytes are both 0 at the timing size n={n}")


def _load_torch_task(raw: dict, root: Path, toml_path: Path) -> TorchTask:
    try:
        task = TorchTask.model_validate({**raw, "root": root.resolve()})
    except ValidationError as e:
        raise TaskError(f"{toml_path}: {_first_error(e)}") from None
    _check_files(toml_path, root, (("kernel", task.kernel), ("reference", task.reference)))
    if task.kernel == task.reference:
        raise TaskError(f"{toml_path}: kernel and reference must be different files")
    if not task.kernel.endswith(".py") or not task.reference.endswith(".py"):
        raise TaskError(f"{toml_path}: kernel and reference of a {task.target} task are Python files (.py)")
    return task


def _check_files(toml_path: Path, root: Path, files: tuple[tuple[str, str], ...]) -> None:
    for label, rel in files:
        p = root / rel
        if Path(rel).is_absolute() or ".." in Path(rel).parts:
            raise TaskError(f"{toml_path}: {label} = {rel!r} must be a path inside the task directory")
        if not p.is_file():
            raise TaskError(f"{toml_path}: {label} file {rel!r} does not exist")
