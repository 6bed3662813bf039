"""The built-in Triton suite (tasks/triton): every task loads, is consistent with its own files, and its
starting kernel verifies through the real torch-family evaluator.

Without a GPU the evaluator runs the kernels under the Triton interpreter (TRITON_INTERPRET=1) on CPU
tensors, in the local sandbox, with the Python named by KERNOPT_TORCH_PYTHON (default: this
interpreter); when that Python cannot run torch and triton, the evaluation tests skip. With a GPU
visible they skip too: there an evaluation also times the timing shape (tests/test_torch_gpu.py).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernopt.candidate import Candidate
from kernopt.config import EvalConfig
from kernopt.errors import InfraError
from kernopt.evaluators.knobs import declared_knobs
from kernopt.evaluators.torch_family.evaluator import TorchEvaluator
from kernopt.evaluators.torch_family.host import INTERPRETER
from kernopt.sandbox.local import LocalSandbox
from kernopt.task import TorchTask, load_task
from tests.conftest import REPO, enterable_tmpdir

SUITE = REPO / "tasks" / "triton"
TASK_DIRS = sorted(p for p in SUITE.iterdir() if (p / "task.toml").is_file())
IDS = [p.name for p in TASK_DIRS]


def _load(path: Path) -> TorchTask:
    task = load_task(path)
    assert isinstance(task, TorchTask), f"{path.name}: not a torch-family task"
    return task


_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
        ast.FloorDiv: lambda a, b: a // b, ast.LShift: lambda a, b: a << b, ast.Pow: lambda a, b: a**b}


def _const_int(node: ast.expr) -> int | None:
    """The value of an integer constant expression (`4096`, `1 << 24`, `2 * 1024`), else None."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, int) and not isinstance(node.value, bool) else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _const_int(node.operand)
        return None if v is None else -v
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        a, b = _const_int(node.left), _const_int(node.right)
        return None if a is None or b is None else _OPS[type(node.op)](a, b)
    return None


def _module_ints(source: str) -> dict[str, int]:
    """Module-level `name = <integer constant expression>` assignments of a reference.py."""
    out: dict[str, int] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = _const_int(node.value)
            if value is not None:
                out[node.targets[0].id] = value
    return out


def test_suite_has_the_documented_tasks() -> None:
    assert len(TASK_DIRS) >= 8
    readme = (SUITE / "README.md").read_text()
    for name in IDS:
        assert f"`{name}`" in readme, f"tasks/triton/README.md does not list {name}"


@pytest.mark.parametrize("path", TASK_DIRS, ids=IDS)
def test_task_loads_and_is_consistent(path: Path) -> None:
    task = _load(path)
    assert task.target == "triton" and task.name == path.name
    ints = _module_ints(task.reference_source())
    for var in task.shapes.vars:
        assert var in ints, f"{path.name}: shape var {var} is not a module-level int of {task.reference}"
    # reference.py's own values are the GPU timing sizes (the timing shape may leave vars out)
    for var, value in task.shapes.timing.items():
        assert ints[var] == value, f"{path.name}: timing {var}={value} but {task.reference} says {ints[var]}"
    knobs = declared_knobs(task.baseline_source())
    assert task.tunables, f"{path.name}: no [[tunables]]"
    for t in task.tunables:
        assert t.name in knobs, f"{path.name}: tunable {t.name} is not a top-level assignment in {task.kernel}"
    # verification under the interpreter must stay cheap: small check shapes and random ranges
    for shape in task.shapes.check:
        assert all(v <= 5000 for v in shape.values()), f"{path.name}: check shape {shape} is too large for the interpreter"
    for var, (_, hi) in task.shapes.random.items():
        assert hi <= 5000, f"{path.name}: random range of {var} is too large for the interpreter"


@pytest.mark.parametrize("path", TASK_DIRS, ids=IDS)
def test_starting_kernel_passes_the_static_gate(path: Path) -> None:
    py_gate = pytest.importorskip("kernopt.evaluators.torch_family.py_gate")
    task = _load(path)
    assert py_gate.check_python_source(task, task.baseline_source()) is None


@pytest.fixture(scope="module")
def workroot() -> Iterator[Path]:
    with enterable_tmpdir("kernopt-triton-suite-") as d:
        yield d


@pytest.fixture(scope="module")
def interpreter_ok(workroot: Path) -> None:
    """Skip the evaluations where the sandbox cannot run torch and triton, or where a GPU is visible."""
    probe = TorchEvaluator(_load(TASK_DIRS[0]), LocalSandbox(), EvalConfig(), workroot / "probe")
    try:
        with probe.session():
            dev = probe.device()
    except InfraError as e:
        pytest.skip(f"the local sandbox cannot run torch and triton ({e}); set KERNOPT_TORCH_PYTHON")
    finally:
        probe.close()
    if dev.cuda:
        pytest.skip("a GPU is visible: an evaluation there also times the task (tests/test_torch_gpu.py covers GPUs)")


@pytest.mark.parametrize("path", TASK_DIRS, ids=IDS)
def test_starting_kernel_verifies_in_the_interpreter(path: Path, workroot: Path, interpreter_ok: None) -> None:
    task = _load(path)
    ev = TorchEvaluator(task, LocalSandbox(), EvalConfig(), workroot / path.name)
    try:
        r = ev.evaluate(Candidate(files={task.kernel: task.baseline_source()}, author="user"))
    finally:
        ev.close()
    assert r.status == "ok", f"{path.name}: {r.status}: {r.reason}\n{r.log[-2000:]}"
    assert "no_gpu_timing" in r.flags
    assert r.verification.device == INTERPRETER
    assert len(r.verification.shapes) >= len(task.shapes.check)
