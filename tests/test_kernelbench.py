"""`kernopt task import-kernelbench`: KernelBench problem files become loadable torch-family tasks."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from kernopt.errors import UserError
from kernopt.kernelbench import import_problems, read_problem
from kernopt.task import load_task
from tests.conftest import REPO

PROBLEMS = REPO / "tests" / "data" / "kernelbench"


def test_shape_vars_are_what_get_inputs_reads_and_init_does_not() -> None:
    relu = read_problem(PROBLEMS / "19_ReLU.py")
    assert relu.shape_vars == ["batch_size", "dim"] and relu.fixed_vars == []
    gemm = read_problem(PROBLEMS / "12_Gemm_Multiply_LeakyReLU.py")
    assert gemm.shape_vars == ["batch_size"]  # in_features sizes the weights: fixed
    assert gemm.fixed_vars == ["in_features", "out_features"]
    mm = read_problem(PROBLEMS / "2_Standard_matrix_multiplication_.py")
    assert mm.shape_vars == ["M", "K", "N"] and mm.ints == {"M": 1024, "K": 4096, "N": 2048}


def test_import_writes_tasks_that_load(tmp_path: Path) -> None:
    written, skipped = import_problems(PROBLEMS, tmp_path / "kb", "triton")
    assert sorted(d.name for d in written) == ["12_Gemm_Multiply_LeakyReLU", "19_ReLU", "2_Standard_matrix_multiplication"]
    assert len(skipped) == 1 and "not_a_problem.py" in skipped[0] and "no class Model" in skipped[0]
    for d in written:
        task = load_task(d)
        assert task.family == "torch" and task.target == "triton"
        assert (d / "reference.py").read_text() == (PROBLEMS / f"{d.name}{'_' if d.name.startswith('2_') else ''}.py").read_text()
        solution = ast.parse((d / "solution.py").read_text())
        names = {n.name for n in solution.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
        assert "ModelNew" in names and "Model" not in names and "get_inputs" not in names
        for shape in task.shapes.check:  # small, and never larger than the file's own sizes
            problem = read_problem(d / "reference.py")
            assert all(1 <= v <= problem.ints[k] for k, v in shape.items())
        assert task.verify.tolerance("float32").rtol == 1e-2  # KernelBench's own tolerance
    relu = load_task(tmp_path / "kb" / "19_ReLU")
    assert relu.shapes.check == [{"batch_size": 3, "dim": 257}, {"batch_size": 3, "dim": 1025}]
    assert "Simple model that performs a ReLU activation" in relu.description


def test_import_never_overwrites_without_force(tmp_path: Path) -> None:
    import_problems(PROBLEMS / "19_ReLU.py", tmp_path, "cuda")
    edited = tmp_path / "19_ReLU" / "solution.py"
    edited.write_text("# my work\n")
    with pytest.raises(UserError, match="already exists"):
        import_problems(PROBLEMS / "19_ReLU.py", tmp_path, "cuda")
    assert edited.read_text() == "# my work\n"
    import_problems(PROBLEMS / "19_ReLU.py", tmp_path, "cuda", force=True)
    assert "class ModelNew" in edited.read_text() and load_task(tmp_path / "19_ReLU").target == "cuda"


@pytest.mark.parametrize("text,message", [
    ("def get_inputs(): return []\ndef get_init_inputs(): return []\n", "no class Model"),
    ("class Model: pass\ndef get_inputs(): return []\n", r"no def get_init_inputs\(\)"),
    ("class Model: pass\n", r"no def get_inputs\(\) and def get_init_inputs\(\)"),
    ("class Model(:\n", "not valid Python"),
    ("class Model: pass\nclass ModelNew: pass\ndef get_inputs(): return []\ndef get_init_inputs(): return []\n", "already defines ModelNew"),
    ("import torch\nclass Model: pass\ndef get_inputs(): return [torch.randn(4)]\ndef get_init_inputs(): return []\n",
     "no module-level integer"),
])
def test_bad_problem_files_are_one_line_errors(tmp_path: Path, text: str, message: str) -> None:
    f = tmp_path / "p.py"
    f.write_text(text)
    with pytest.raises(UserError, match=message) as e:
        import_problems(f, tmp_path / "out")
    assert "\n" not in str(e.value)
    assert not (tmp_path / "out").exists()


def test_cli_import(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, "-m", "kernopt.cli", "task", "import-kernelbench", str(PROBLEMS / "19_ReLU.py"),
                          "--out", str(tmp_path)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "imported" in run.stdout and (tmp_path / "19_ReLU" / "task.toml").is_file()
    again = subprocess.run([sys.executable, "-m", "kernopt.cli", "task", "import-kernelbench", str(PROBLEMS / "19_ReLU.py"),
                            "--out", str(tmp_path)], capture_output=True, text=True)
    assert again.returncode == 2 and again.stderr.count("\n") == 1 and "already exists" in again.stderr
    missing = subprocess.run([sys.executable, "-m", "kernopt.cli", "task", "import-kernelbench", str(tmp_path / "nope")],
                             capture_output=True, text=True)
    assert missing.returncode == 2 and "no such file or directory" in missing.stderr
