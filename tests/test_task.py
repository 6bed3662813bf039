"""Task loading: valid built-in tasks load; every mistake in a task directory is one precise line."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernopt.errors import TaskError
from kernopt.task import load_task
from tests.conftest import REPO

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
