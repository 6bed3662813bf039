"""`kernopt task new`: a task written from a kernel of one's own (not in the repository) passes `task check`
without hand edits, for three shapes: a stencil, a reduction over a struct of arrays, an integer kernel."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from kernopt.errors import TaskError
from kernopt.task_new import configure, harness_source, parse_kernel, sizes_at
from tests.conftest import REPO, needs
from tests.test_cli import kernopt

KERNELS = REPO / "tests" / "data" / "new_kernels"


def test_signature_is_classified() -> None:
    plan = parse_kernel((KERNELS / "soa_energy.c").read_text(), "inertia")
    assert {b.name: b.role for b in plan.buffers.values()} == {"p.x": "in", "p.y": "in", "p.m": "in", "return": "out"}
    assert [(s.name, s.integer) for s in plan.scalars.values()] == [("p.count", True), ("cx", False), ("cy", False)]
    assert plan.return_type == "double" and "struct particles {" in "\n".join(plan.preamble)
    plan = parse_kernel((KERNELS / "int_mix.c").read_text(), "int_mix")
    assert {b.name: (b.role, b.dtype) for b in plan.buffers.values()} == {
        "keys": ("in", "KO_I32"), "salt": ("in", "KO_I32"), "out": ("out", "KO_I64"), "hist": ("out", "KO_I32")}
    assert "#include <stdint.h>" in plan.preamble


def test_sizes_roles_and_fills_from_options_and_prompts() -> None:
    plan = parse_kernel((KERNELS / "blur5.c").read_text(), "blur5")
    configure(plan, ["in=n*n"], [], ["out=inout"], ["in=0:2"], None)
    assert plan.buffers["in"].size == "n*n" and plan.buffers["out"].size == "n" and plan.buffers["out"].role == "inout"
    assert plan.buffers["in"].fill == ("0", "2")
    assert sizes_at(plan, 7)[1] == {"in": 49, "out": 7}
    asked: list[str] = []

    def ask(question: str, default: str) -> str:
        asked.append(question)
        return {"in": "n^2", "out": "n*n"}.get(question.split()[1].rstrip(":"), default) if "elements" in question else default

    plan = parse_kernel((KERNELS / "blur5.c").read_text(), "blur5")
    configure(plan, [], [], [], [], ask)
    assert sizes_at(plan, 5)[1] == {"in": 25, "out": 25}
    assert any("scalar n" in q for q in asked) and sum("elements" in q for q in asked) == 2
    assert "((long)n * (long)n)" in harness_source(plan)


@pytest.mark.parametrize("source,message", [
    ("void f(long n, double **a) { }", "pointers to pointers"),
    ("void f(long n, const double *a) { }", "no output"),
    ("static void f(double *a) { }", "static"),
    ("void g(double *a) { }", "no definition of function 'f' here (functions defined: g"),
    ("void f(long n, short *a) { }", "type 'short'"),
])
def test_unsupported_signatures_are_one_line(source: str, message: str) -> None:
    with pytest.raises(TaskError, match=None) as exc:
        parse_kernel(source, "f")
    assert message in str(exc.value)


@pytest.mark.parametrize("opts,message", [
    (["--size", "z=n"], "'z' is not a parameter of blur5"),
    (["--size", "in=m*m"], "unknown name 'm'"),
    (["--size", "in=n/(n-n)"], "divides by zero"),
    (["--role", "out=temp"], "expected in, out, inout or scratch"),
])
def test_bad_options_are_one_line(opts: list[str], message: str) -> None:
    plan = parse_kernel((KERNELS / "blur5.c").read_text(), "blur5")
    sizes = [v for k, v in zip(opts, opts[1:], strict=False) if k == "--size"]
    roles = [v for k, v in zip(opts, opts[1:], strict=False) if k == "--role"]
    with pytest.raises(TaskError) as exc:
        configure(plan, sizes, [], roles, [], None)
    assert message in str(exc.value)


def _checked(p_returncode: int, stdout: str, stderr: str, task: Path) -> dict[str, object]:
    assert p_returncode == 0, stdout + stderr
    assert "FAIL" not in stdout
    for name in ("load", "build", "run", "finite", "depends-on-inputs", "deterministic", "timing"):
        assert f" {name}: " in stdout, stdout
    return tomllib.loads((task / "task.toml").read_text())


@needs("gcc")
def test_stencil_through_the_prompts(tmp_path: Path) -> None:
    task = tmp_path / "blur"
    # answers: scalar n, then per buffer role, size (and the input's fill range)
    answers = "n\nin\nn*n\n-1:1\nout\nn*n\n"
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "kernopt", "task", "new", "blur", "--from", str(KERNELS / "blur5.c"),
                        "--function", "blur5", "--out", str(task), "--timing", "1200", "--sandbox", "local"],
                       input=answers, capture_output=True, text=True, timeout=600, cwd=REPO)
    toml = _checked(p.returncode, p.stdout, p.stderr, task)
    assert toml["signature"] == "void blur5(long n, const double *restrict in, double *restrict out)"
    assert (task / "kernel.c").read_text() == (KERNELS / "blur5.c").read_text()
    harness = (task / "harness.c").read_text()
    assert '"in", KO_F64, KO_IN' in harness and '"out", KO_F64, KO_OUT' in harness


@needs("gcc")
def test_struct_of_arrays_reduction_with_calibrated_timing(tmp_path: Path) -> None:
    task = tmp_path / "soa"
    p = kernopt("task", "new", "soa", "--from", str(KERNELS / "soa_energy.c"), "--function", "inertia", "--out", str(task),
                "--yes", "--sandbox", "local")
    toml = _checked(p.returncode, p.stdout, p.stderr, task)
    assert "timing size" in p.stdout and toml["sizes"]["timing"] > 10_000  # type: ignore[index]
    assert '"p.x", KO_F64, KO_IN' in (task / "harness.c").read_text()


@needs("gcc")
def test_integer_kernel_from_options(tmp_path: Path) -> None:
    task = tmp_path / "mix"
    p = kernopt("task", "new", "mix", "--from", str(KERNELS / "int_mix.c"), "--function", "int_mix", "--out", str(task),
                "--size", "hist=64", "--param", "n", "--fill", "keys=0:n", "--yes", "--timing", "4000000", "--sandbox", "local")
    _checked(p.returncode, p.stdout, p.stderr, task)
    harness = (task / "harness.c").read_text()
    assert '"hist", KO_I32, KO_OUT, count3' in harness and "ko_count(64L)" in harness


@needs("gcc")
def test_check_runs_and_fails_a_kernel_that_ignores_its_inputs(tmp_path: Path) -> None:
    src = tmp_path / "zero.c"
    src.write_text("void zero(long n, const double *a, double *out) { for (long i = 0; i < n; i++) out[i] = 0.0; }\n")
    p = kernopt("task", "new", "zero", "--from", str(src), "--function", "zero", "--out", str(tmp_path / "zero"),
                "--yes", "--timing", "100000", "--sandbox", "local")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "FAIL depends-on-inputs" in p.stdout


def test_existing_directory_is_not_overwritten(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "keep").write_text("x")
    p = kernopt("task", "new", "t", "--from", str(KERNELS / "blur5.c"), "--function", "blur5", "--out", str(tmp_path / "t"),
                "--yes", "--timing", "100", "--no-check")
    assert p.returncode == 2 and "exists and is not empty" in p.stderr


@needs("gcc")
def test_scratch_role_declares_an_input_the_kernel_may_overwrite(tmp_path: Path) -> None:
    """--role w=scratch: w is filled like an input (KO_IN, checked by nothing but named in verify.scratch)."""
    src = tmp_path / "sc.c"
    src.write_text("void sc(long n, const double *a, double *w, double *out) {\n"
                   "    for (long i = 0; i < n; i++) w[i] += a[i];\n"
                   "    for (long i = 0; i < n; i++) out[i] = 2.0 * w[i];\n}\n")
    task = tmp_path / "sc"
    p = kernopt("task", "new", "sc", "--from", str(src), "--function", "sc", "--out", str(task), "--role", "w=scratch",
                "--yes", "--timing", "2000000", "--sandbox", "local")
    toml = _checked(p.returncode, p.stdout, p.stderr, task)
    assert toml["verify"]["scratch"] == ["w"]  # type: ignore[index]
    harness = (task / "harness.c").read_text()
    assert '"w", KO_F64, KO_IN' in harness and "ko_fill_uniform(ko_v_w, " in harness  # filled before every call
    with pytest.raises(TaskError, match="no buffer is an output"):
        plan = parse_kernel(src.read_text(), "sc")
        configure(plan, [], [], ["out=in", "w=scratch"], [], None)
