"""Task loading: valid built-in tasks load; every mistake in a task directory is one precise line."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernopt.errors import TaskError
from kernopt.task import load_task
from tests.conftest import REPO, needs

BUILTIN = sorted(p.parent for p in (REPO / "tasks").glob("*/*/task.toml"))


@pytest.mark.parametrize("path", BUILTIN, ids=[f"{p.parent.name}/{p.name}" for p in BUILTIN])
def test_builtin_tasks_load(path: Path) -> None:
    task = load_task(path)
    assert task.name == path.name
    assert task.target == {"openmp": "openmp", "mpi": "mpi", "triton": "triton"}.get(path.parent.name, task.target)
    if task.family == "c":
        assert len(task.sizes.check) >= 2 and task.verify.seeds >= 5
    else:
        assert len(task.shapes.check) >= 2 and task.verify.seeds >= 5


def test_suites_have_the_required_tasks() -> None:
    names = {p.name for p in BUILTIN if p.parent.name == "openmp"}
    assert len(names) >= 12 and {"gemm", "jacobi2d", "trisolve", "gauss_seidel"} <= names
    assert len([p for p in BUILTIN if p.parent.name == "mpi"]) >= 5


def _edit(task_dir: Path, old: str, new: str) -> None:
    toml = task_dir / "task.toml"
    text = toml.read_text()
    assert old in text
    toml.write_text(text.replace(old, new))


@pytest.mark.parametrize("old,new,message", [
    ('target = "openmp"', 'target = "fortran"', "unknown target 'fortran'"),
    ('kernel = "kernel.c"', 'kernel = "nope.c"', "kernel file 'nope.c' does not exist"),
    ('kernel = "kernel.c"', 'kernel = "../kernel.c"', "must be a path inside the task directory"),
    ("timing = 160", "timing = -3", "sizes.timing: Input should be greater than 0"),
    ("timing = 160", "timing = 5", "smaller than the largest check size"),
    ("timing = 160", "timing = 160\ntimming = 3", "sizes.timming: unknown key (typo?)"),
    ('name = "small_gemm"', "", "name: required key is missing"),
    ("random = [65, 100]", "random = [100, 65]", "random must be [lo, hi]"),
    ('functions = ["gemm"]', "functions = []", "functions: List should have at least 1 item"),
    ("rtol = 1e-9", "rtol = 1e-9\nseeds = 2", "verify.seeds: Input should be greater than or equal to 5"),
    ('name = "small_gemm"', 'name = "small_gemm', "not valid TOML"),
    # per-output settings (verify.outputs.NAME)
    ("norm_rtol = 1e-12", 'norm_rtol = 1e-12\noutputs = {c = {range = ["0", "m"]}}', "unknown name 'm'"),
    ("norm_rtol = 1e-12", "norm_rtol = 1e-12\noutputs = {c = {rtol = -1}}", "verify.outputs.c.rtol: Input should be greater"),
    ("norm_rtol = 1e-12", "norm_rtol = 1e-12\noutputs = {c = {tol = 1}}", "verify.outputs.c.tol: unknown key (typo?)"),
])
def test_bad_task_toml_gives_one_precise_line(small_task: Path, old: str, new: str, message: str) -> None:
    _edit(small_task, old, new)
    with pytest.raises(TaskError) as exc:
        load_task(small_task)
    assert message in str(exc.value)
    assert "\n" not in str(exc.value)


def test_missing_directory_and_missing_toml(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="no such task directory"):
        load_task(tmp_path / "nope")
    with pytest.raises(TaskError, match="no task.toml here"):
        load_task(tmp_path)
    (tmp_path / "f").write_text("x")
    with pytest.raises(TaskError, match="not a directory"):
        load_task(tmp_path / "f")


def test_docs_typo_example_gives_the_documented_message(small_task: Path) -> None:
    """docs/tasks.md: a misspelt key is named as unknown, even when the key it misspells is then missing."""
    doc = (REPO / "docs" / "tasks.md").read_text()
    documented = "sizes.timming: unknown key (typo? did you mean 'timing'?)"
    assert documented in doc
    _edit(small_task, "timing = 160", "timming = 160")  # the typo replaces the key, as a person makes it
    with pytest.raises(TaskError) as exc:
        load_task(small_task)
    assert str(exc.value) == f"{small_task / 'task.toml'}: {documented}"


@needs("gcc")
def test_harness_compile_error_names_the_compilers_error_line(small_task: Path) -> None:
    """A harness error followed by notes (more than the last lines of the log) still shows its `error:` line."""
    from kernopt.sandbox import get_sandbox
    from kernopt.task_check import check_task

    harness = small_task / "harness.c"
    # a conflicting declaration: gcc prints the error, then a note pointing at the previous declaration
    harness.write_text(harness.read_text() + "\nint ko_setup(long n, ko_buf *bufs, int extra) { return 0; }\n")
    checks = check_task(load_task(small_task), get_sandbox("local", "openmp"))
    build = next(c for c in checks if c.name == "build")
    assert not build.ok
    assert "error: conflicting types for" in build.detail and "ko_setup" in build.detail, build.detail
    assert build.detail.startswith("task harness does not build (harness.c): harness.c:")


def test_per_output_settings_load(small_task: Path) -> None:
    _edit(small_task, "norm_rtol = 1e-12", 'norm_rtol = 1e-12\nscratch = ["a"]\n\n[verify.outputs.c]\nrtol = 0\n'
          'range = ["0", "n*(n+1)/2"]')
    task = load_task(small_task)
    assert task.family == "c" and task.verify.scratch == ["a"]
    assert task.verify.tolerances("c") == (0.0, 1e-12, 1e-12) and task.verify.part("c", 4, 16) == slice(0, 10)


@needs("gcc")
def test_task_check_judges_only_the_compared_part(tmp_path: Path) -> None:
    """A kernel that writes the first half of its output: the unwritten rest is non-finite (poisoned) and fails
    `finite`, unless verify.outputs names the written part as the range compared."""
    from kernopt.sandbox import get_sandbox
    from kernopt.task_check import check_task
    from kernopt.task_new import create

    src = tmp_path / "half.c"
    src.write_text("void half(long n, const double *a, double *out) { for (long i = 0; i < n / 2; i++) out[i] = 2.0 * a[i]; }\n")
    task_dir = tmp_path / "half"
    create("half", src, "half", task_dir, sizes=[], params=[], roles=[], fills=[], ask=None, target="c", timing=4000,
           sandbox=None)
    sb = get_sandbox("local", "c")
    finite = next(c for c in check_task(load_task(task_dir), sb) if c.name == "finite")
    assert not finite.ok and "non-finite reference output: out" in finite.detail
    toml = task_dir / "task.toml"
    toml.write_text(toml.read_text() + '\n[verify.outputs.out]\nrange = ["0", "n/2"]\n')
    checks = {c.name: c for c in check_task(load_task(task_dir), sb)}
    assert checks["finite"].ok and checks["depends-on-inputs"].ok and "buffers" not in checks
    toml.write_text(toml.read_text() + '\n[verify.outputs.nope]\nrtol = 0\n')
    checks = {c.name: c for c in check_task(load_task(task_dir), sb)}
    assert not checks["buffers"].ok and "verify.outputs.nope is not an output buffer" in checks["buffers"].detail


SCRATCH_BASE = """void sc(long n, double *w, const double *a, double *out) {
    for (long i = 0; i < n; i++) w[i] = 2.0 * a[i];
    for (long i = 0; i < n; i++) out[i] = w[i] + 1.0;
}
"""


@needs("gcc")
@pytest.mark.parametrize("extra,verdict", [
    ("", "ok"),  # writes its scratch input w only: allowed
    ("((double *)a)[n - 1] = 0.0;", "a"),  # also writes input a, after the scratch w in the table: rejected, naming a
])
def test_scratch_inputs_may_be_overwritten_and_no_others(tmp_path: Path, extra: str, verdict: str) -> None:
    """verify.scratch = ["w"]: a kernel may overwrite w; every other input is still checked around every call
    (the monitor names every changed input, not the first: w comes first in the table here)."""
    from kernopt.task import Task
    from kernopt.task_new import create

    src = tmp_path / "sc.c"
    src.write_text(SCRATCH_BASE)
    task_dir = tmp_path / "sc"
    create("sc", src, "sc", task_dir, sizes=[], params=[], roles=["w=in"], fills=[], ask=None, target="c", timing=4000,
           sandbox=None)
    toml = task_dir / "task.toml"
    toml.write_text(toml.read_text().replace("[verify]\n", '[verify]\nscratch = ["w"]\n'))
    task = load_task(task_dir)
    assert isinstance(task, Task) and task.verify.scratch == ["w"]
    _assert_untimed_verdict(task, "c", SCRATCH_BASE.replace("w[i] + 1.0;\n", "w[i] + 1.0;\n    " + extra + "\n"), verdict)
    # without the scratch declaration, writing w is rejected as before
    task2 = task.model_copy(update={"verify": task.verify.model_copy(update={"scratch": []})})
    _assert_untimed_verdict(task2, "c", SCRATCH_BASE, "w")


def _assert_untimed_verdict(task: object, target: str, source: str, verdict: str) -> None:
    """The candidate's verification (no timing) ends ok, or rejected for modifying the input named `verdict`."""
    import tempfile

    from kernopt.candidate import Candidate
    from kernopt.config import EvalConfig
    from kernopt.evaluators.c_family.evaluator import CFamilyEvaluator
    from kernopt.sandbox import get_sandbox
    from kernopt.task import Task

    assert isinstance(task, Task)
    ev = CFamilyEvaluator(task, get_sandbox("local", target), EvalConfig(), Path(tempfile.mkdtemp(prefix="kernopt-test-")))
    try:
        result, _ = ev.check_untimed(Candidate(files={"kernel.c": source}))
    finally:
        ev.close()
    if verdict == "ok":
        assert result.status == "ok", result.reason
    else:
        assert result.status == "rejected" and f"modified its input '{verdict}'" in result.reason, result.reason


def test_memory_limit_is_bounded(small_task: Path) -> None:
    _edit(small_task, "[timing]", "[limits]\nmemory_mb = 1000000\n\n[timing]")
    with pytest.raises(TaskError) as exc:
        load_task(small_task)
    assert "limits.memory_mb: Input should be less than or equal to 65536" in str(exc.value)


@needs("gcc")
def test_task_memory_limit_replaces_the_default_cap(small_task: Path) -> None:
    """A harness that reserves 5 GiB of address space fails under the default 4 GiB cap and runs when the task
    asks for 8 GiB (limits.memory_mb)."""
    from kernopt.sandbox import get_sandbox
    from kernopt.task_check import check_task

    harness = small_task / "harness.c"
    text = harness.read_text()
    old = "int ko_setup(long n, ko_buf *bufs) {"
    assert old in text
    harness.write_text(text.replace(old, old + "\n    static char *big;\n    if (!big && !(big = malloc(5UL << 30))) abort();"))
    sb = get_sandbox("local", "openmp")
    run = next(c for c in check_task(load_task(small_task), sb) if c.name == "run")
    assert not run.ok
    _edit(small_task, "[timing]", "[limits]\nmemory_mb = 8192\n\n[timing]")
    run = next(c for c in check_task(load_task(small_task), sb) if c.name == "run")
    assert run.ok, run.detail


MPI_DOT = (REPO / "tests" / "redteam" / "control_mpi_dot.c").read_text()


@needs("mpicc", "mpirun")
@pytest.mark.parametrize("writes,verdict", [
    ("if (rank == 1 && hi > lo) ((double *)x)[lo] = 0.0;", "ok"),  # the scratch input x, on rank 1 only
    ("if (rank == 1 && hi > lo) { ((double *)x)[lo] = 0.0; ((double *)y)[lo] = 0.0; }", "y"),  # and y: rejected
])
def test_scratch_under_mpi_other_ranks(tmp_path: Path, writes: str, verdict: str) -> None:
    """Ranks other than 0 check their own inputs and report every changed one (a bitmask, not the first index):
    with x as scratch, a kernel that also writes y on rank 1 is rejected, naming y."""
    import shutil

    from kernopt.task import Task

    task_dir = tmp_path / "small_dot"
    shutil.copytree(REPO / "tests" / "redteam" / "small_dot", task_dir)
    _edit(task_dir, "ranks = [1, 2, 3, 4]", 'ranks = [1, 2]\nscratch = ["x"]')
    _edit(task_dir, "check = [1, 2, 3, 7, 33, 1000, 4099, 100003]", "check = [7, 1000]")
    task = load_task(task_dir)
    assert isinstance(task, Task)
    cand = MPI_DOT.replace("    MPI_Reduce(", f"    {writes}\n    MPI_Reduce(")
    assert cand != MPI_DOT
    _assert_untimed_verdict(task, "mpi", cand, verdict)
