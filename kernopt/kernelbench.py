"""`kernopt task import-kernelbench`: KernelBench problem files -> torch-family task directories.

A KernelBench problem is one Python file: `class Model(nn.Module)`, `get_inputs()`,
`get_init_inputs()` and module-level integers that size them (`batch_size = 16`, `dim = 16384`).
The file is read, never executed. Each becomes a directory with:

- `reference.py`: the file itself, unchanged (the truth candidates are checked against);
- `solution.py`: the starting point, the reference's code with `Model` renamed `ModelNew` (eager
  PyTorch: the first candidates replace it with kernels; the baseline is trusted, so its torch ops
  are allowed there and nowhere else);
- `task.toml`: shape vars = the integers `get_inputs()` reads and `get_init_inputs()` does not
  (those size the weights and stay fixed); two small odd check shapes and a random range derived
  from the file's values; the file's values are the timing shape; KernelBench's tolerance (1e-2).

Shape constraints a file does not state (a kernel size larger than a shrunken image, a divisibility)
cannot be seen statically: `kernopt task check` runs the reference at every check shape and says
which one fails.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from kernopt.errors import UserError

KERNELBENCH_TOLERANCE = 1e-2  # KernelBench's own atol = rtol for fp32 outputs


@dataclass
class Problem:
    """What the importer read from one problem file."""

    path: Path
    name: str
    source: str
    ints: dict[str, int]
    shape_vars: list[str]
    fixed_vars: list[str]
    doc: str


def _int_value(node: ast.expr, known: dict[str, int]) -> int | None:
    """A module-level integer expression: literals, names already read, + - * // ** and <<."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name):
        return known.get(node.id)
    if isinstance(node, ast.BinOp):
        a, b = _int_value(node.left, known), _int_value(node.right, known)
        if a is None or b is None:
            return None
        ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
               ast.FloorDiv: lambda: a // b if b else None, ast.Pow: lambda: a ** b if 0 <= b <= 64 else None,
               ast.LShift: lambda: a << b if 0 <= b <= 64 else None}
        op = ops.get(type(node.op))
        return op() if op else None
    return None


def _names_read(fn: ast.FunctionDef) -> set[str]:
    return {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def read_problem(path: Path) -> Problem:
    """Parse one KernelBench problem file. UserError (one line) when it is not one."""
    try:
        source = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: cannot read: {e}") from None
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as e:
        raise UserError(f"{path}:{e.lineno}: not valid Python: {e.msg}") from None
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    missing = [name for name in ("get_inputs", "get_init_inputs") if name not in funcs]
    if "Model" not in classes or missing:
        what = "class Model" if "Model" not in classes else " and ".join(f"def {m}()" for m in missing)
        raise UserError(f"{path}: not a KernelBench problem (no {what})")
    if "ModelNew" in classes:
        raise UserError(f"{path}: already defines ModelNew (a solution, not a problem file)")
    ints: dict[str, int] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = _int_value(node.value, ints)
            if value is not None and value > 0:
                ints[node.targets[0].id] = value
    in_inputs = _names_read(funcs["get_inputs"]) & set(ints)
    in_init = _names_read(funcs["get_init_inputs"]) & set(ints)
    order = list(ints)
    shape_vars = [v for v in order if v in in_inputs and v not in in_init]
    fixed = [v for v in order if v in in_init]
    if not shape_vars:
        raise UserError(f"{path}: get_inputs() reads no module-level integer that get_init_inputs() does not; "
                        "kernopt needs at least one shape variable to vary")
    doc = ast.get_docstring(classes["Model"]) or ""
    name = re.sub(r"[^A-Za-z0-9_.+-]+", "_", path.stem).strip("_") or "problem"
    return Problem(path, name, source, ints, shape_vars, fixed, doc)


def _odd_at_most(value: int, cap: int) -> int:
    v = min(value, cap)
    return v + 1 if v % 2 == 0 and v + 1 <= cap else v


def check_shapes(p: Problem) -> list[dict[str, int]]:
    """Two small shapes with odd values where the file allows: about 1/64 and 1/16 of the file's sizes."""
    shapes = []
    for div, floor in ((64, 2), (16, 3)):
        shapes.append({v: _odd_at_most(max(floor, p.ints[v] // div), p.ints[v]) for v in p.shape_vars})
    return [s for i, s in enumerate(shapes) if s not in shapes[:i]]


def random_ranges(p: Problem) -> dict[str, tuple[int, int]]:
    return {v: (min(p.ints[v], max(2, p.ints[v] // 64)), min(p.ints[v], max(3, p.ints[v] // 8))) for v in p.shape_vars}


def starting_solution(p: Problem) -> str:
    """The reference's code with Model renamed ModelNew and the input builders removed."""
    tree = ast.parse(p.source)
    drop = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in ("get_inputs", "get_init_inputs")]
    lines = p.source.splitlines(keepends=True)
    for node in sorted(drop, key=lambda n: -n.lineno):
        start = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
        del lines[start:node.end_lineno]
    body = "".join(lines)
    body = re.sub(r"\bclass\s+Model\b", "class ModelNew", body)
    body = re.sub(r"\bsuper\(\s*Model\s*,", "super(ModelNew,", body)
    header = (f'"""Starting point imported from KernelBench problem {p.path.name}: the reference computation in eager\n'
              'PyTorch, as ModelNew. Replace its torch operations with Triton or CUDA kernels; candidates may not\n'
              'call the reference\'s torch ops (only this starting file may)."""\n')
    return header + re.sub(r"\n{3,}", "\n\n\n", body).rstrip() + "\n"


def _toml_shape(shape: dict[str, int]) -> str:
    return "{" + ", ".join(f"{k} = {v}" for k, v in shape.items()) + "}"


def task_toml(p: Problem, target: str) -> str:
    doc = p.doc.strip() or "(the problem file has no docstring; read reference.py)"
    description = f"{doc}\n\nImported from KernelBench problem {p.path.name}. Write ModelNew with {target} kernels; " \
                  f"same constructor arguments and forward inputs/outputs as Model in reference.py."
    description = description.replace('"""', "'''")
    rnd = random_ranges(p)
    lines = [
        f'name = "{p.name}"',
        f'target = "{target}"',
        f'description = """\n{description}\n"""',
        'kernel = "solution.py"',
        'reference = "reference.py"',
        "",
        "[shapes]",
        f"vars = [{', '.join(repr(v).replace(chr(39), chr(34)) for v in p.shape_vars)}]",
        f"# fixed by get_init_inputs() or otherwise kept at the file's values: {', '.join(p.fixed_vars) or 'none'}",
        f"check = [{', '.join(_toml_shape(s) for s in check_shapes(p))}]",
        f"random = {{{', '.join(f'{v} = [{lo}, {hi}]' for v, (lo, hi) in rnd.items())}}}",
        "# timing: the problem file's own values",
        "",
        "[verify]",
        "# KernelBench's tolerance; tighten it where the problem allows",
        f"tolerances = {{float32 = {{rtol = {KERNELBENCH_TOLERANCE}, atol = {KERNELBENCH_TOLERANCE}}}, "
        "float16 = {rtol = 2e-2, atol = 2e-2}, bfloat16 = {rtol = 5e-2, atol = 5e-2}, float64 = {rtol = 1e-7, atol = 1e-9}}",
        "",
    ]
    return "\n".join(lines)


def problem_files(path: Path) -> list[Path]:
    """The problem files at `path`: the file itself, or every *.py under a directory (sorted)."""
    if not path.exists():
        raise UserError(f"{path}: no such file or directory")
    if path.is_file():
        return [path]
    files = sorted(p for p in path.rglob("*.py") if p.is_file() and not p.name.startswith("_"))
    if not files:
        raise UserError(f"{path}: no .py files here")
    return files


def import_problems(path: Path, out: Path, target: str = "triton", force: bool = False) -> tuple[list[Path], list[str]]:
    """Write one task directory per problem under `out`. Returns (directories written, skipped files with why).
    Refuses to overwrite an existing task directory unless `force`; a single named file that is not a
    problem is an error, a directory's non-problem files are skipped."""
    if target not in ("triton", "cuda"):
        raise UserError(f"unknown target {target!r}; KernelBench problems import as triton or cuda")
    files = problem_files(path)
    written: list[Path] = []
    skipped: list[str] = []
    problems: list[Problem] = []
    for f in files:
        try:
            problems.append(read_problem(f))
        except UserError as e:
            if path.is_file():
                raise
            skipped.append(str(e))
    names = [p.name for p in problems]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise UserError(f"two problem files map to the task name {dup!r}; import them separately")
    for p in problems:
        d = out / p.name
        if d.exists() and not force:
            raise UserError(f"{d}: already exists (pass --force to overwrite the task directories this import writes)")
    for p in problems:
        d = out / p.name
        d.mkdir(parents=True, exist_ok=True)
        (d / "reference.py").write_text(p.source)
        (d / "solution.py").write_text(starting_solution(p))
        (d / "task.toml").write_text(task_toml(p, target))
        written.append(d)
    return written, skipped
