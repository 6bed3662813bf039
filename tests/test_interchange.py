"""The accumulator-nest interchange (kernopt/tuner/interchange.py): where it applies, what it writes,
and that the evaluator verifies what it writes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kernopt.candidate import Candidate
from kernopt.config import EvalConfig
from kernopt.evaluators.c_family.evaluator import CFamilyEvaluator
from kernopt.sandbox import get_sandbox
from kernopt.task import load_task
from kernopt.tuner.cloops import _PARSER, _walk
from kernopt.tuner.interchange import LARGE, array_stride, interchanges, stride
from tests.conftest import enterable_tmpdir

ROOT = Path(__file__).resolve().parent.parent

GEMM = (ROOT / "tasks/openmp/gemm/kernel.c").read_text()  # the textbook i-j-k nest with an accumulator


def _index(expr: str) -> tuple[object, object]:
    """The subscript node of `x[expr]` and the whole subscript expression."""
    tree = _PARSER.parse(f"void f(void) {{ y = x[{expr}]; }}".encode())
    sub = next(n for n in _walk(tree.root_node) if n.type == "subscript_expression")
    return sub.child_by_field_name("index"), sub


@pytest.mark.parametrize(("expr", "var", "want"), [
    ("i * n + k", "k", 1), ("i * n + k", "i", LARGE), ("k", "k", 1), ("i * n + k", "j", 0),
    ("(k + 1)", "k", 1), ("k * n + j", "k", LARGE), ("n - k", "k", LARGE), ("k + k", "k", LARGE),
    ("idx[k]", "k", LARGE), ("2 * k", "k", LARGE),
])
def test_stride(expr: str, var: str, want: int) -> None:
    index, _ = _index(expr)
    assert stride(index, var) == want  # type: ignore[arg-type]


def test_array_stride_of_two_dimensional_arrays() -> None:
    tree = _PARSER.parse(b"void f(void) { y = b[k][j]; }")
    sub = next(n for n in _walk(tree.root_node) if n.type == "subscript_expression")
    assert array_stride(sub, "j") == 1 and array_stride(sub, "k") == LARGE and array_stride(sub, "i") == 0


def test_gemm_is_turned_inside_out() -> None:
    [x] = interchanges(GEMM)
    assert (x.outer_var, x.inner_var, x.line, x.gain) == ("j", "k", 3, 1)
    assert x.source == """/* Serial baseline: C = A * B, n x n, row-major. */
void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    for (long i = 0; i < n; i++) {
        for (long j = 0; j < n; j++) {
            c[i * n + j] = 0.0;
        }
        for (long k = 0; k < n; k++) {
            for (long j = 0; j < n; j++) {
                c[i * n + j] += a[i * n + k] * b[k * n + j];
            }
        }
    }
}
"""


def test_only_the_strided_nest_of_mvt() -> None:
    source = (ROOT / "tasks/openmp/mvt/kernel.c").read_text()
    [x] = interchanges(source)  # x1 = A y1 already walks rows; x2 = A^T y2 walks columns
    assert (x.outer_var, x.inner_var) == ("i", "j")
    assert "x2[i] += a[j * n + i] * y2[j];" in x.source and "s += a[i * n + j] * y1[j];" in x.source


def test_subtraction_and_an_enclosing_parallel_loop_are_kept() -> None:
    source = GEMM.replace("s += ", "s -= ").replace("    for (long i", "    #pragma omp parallel for\n    for (long i", 1)
    [x] = interchanges(source)
    assert "#pragma omp parallel for\n    for (long i" in x.source and "c[i * n + j] -= a[i * n + k]" in x.source


@pytest.mark.parametrize("change", [
    ("            for (long k", "            #pragma omp simd reduction(+:s)\n            for (long k"),  # pragma on k
    ("        for (long j", "        #pragma omp simd\n        for (long j"),  # pragma on j
    ("    for (long i", "    #pragma omp parallel for collapse(2)\n    for (long i"),  # j is in a collapse nest
    ("c[i * n + j] = s;", "c[i * n] = s;"),  # the store does not depend on j
    ("b[k * n + j]", "c[k * n + j]"),  # the sum reads the output array
    ("b[k * n + j]", "g(b[k * n + j])"),  # an unknown call
    ("k < n; k++", "k < j; k++"),  # triangular: the k bounds depend on j
    ("double s = 0.0;", "double s = 0.0; s *= 2.0;"),  # more than the three statements
    ("s += a[i * n + k] * b[k * n + j];", "s = a[i * n + k] * b[k * n + j];"),  # not an accumulation
    ("c[i * n + j] = s;", "c[i * n + j] = 2.0 * s;"),  # not a plain store of the accumulator
    ("a[i * n + k] * b[k * n + j]", "a[k * n + i] * b[j * n + k]"),  # j would be the strided one: no gain
])
def test_not_applicable(change: tuple[str, str]) -> None:
    old, new = change
    assert old in GEMM
    assert interchanges(GEMM.replace(old, new, 1)) == []


def test_matchain_has_two_independent_interchanges() -> None:
    source = (ROOT / "tasks/openmp/matchain/kernel.c").read_text()
    xs = interchanges(source)
    assert [(x.outer_var, x.inner_var) for x in xs] == [("j", "k"), ("j", "k")]
    assert "tmp[i * n + j] += a[i * n + k] * b[k * n + j];" in xs[0].source
    assert "d[i * n + j] += tmp[i * n + k] * c[k * n + j];" in xs[1].source


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")
@pytest.mark.parametrize("name", ["gemm", "mvt", "matchain"])
def test_the_evaluator_verifies_the_interchanged_kernel(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every interchange of the built-in tasks, applied together, passes the evaluator's correctness sweep."""
    task = load_task(ROOT / "tasks/openmp" / name)
    source = task.baseline_source()
    while xs := interchanges(source):
        source = xs[0].source
    assert source != task.baseline_source()
    monkeypatch.setenv("KERNOPT_HOST_LOCK", str(tmp_path / "host.lock"))  # untimed: no need to queue behind timing
    with enterable_tmpdir("kernopt-interchange-test-") as d:
        ev = CFamilyEvaluator(task, get_sandbox("local"), EvalConfig(), d / "ev")
        try:
            result, _ = ev.check_untimed(Candidate(files={task.kernel: source}, author="test", idea="interchange"))
        finally:
            ev.close()
    assert result.status == "ok", f"{result.status}: {result.reason}\n{result.log[-1500:]}"
