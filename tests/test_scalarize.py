"""Scalar replacement of an in-memory accumulator with a simd reduction (kernopt/tuner/scalarize.py): where it is
legal, what it writes, and that the rewritten kernels compute the same sums to rounding."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kernopt.tuner.cmacros import expand
from kernopt.tuner.policy import permutation_moves
from kernopt.tuner.scalarize import scalarizations
from tests.test_unroll import MATVEC, MATVEC_CALL, RANK_K, RANK_K_CALL, same_results

ROOT = Path(__file__).resolve().parents[1]
needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")


def test_a_dot_product_into_an_element_gets_a_register_and_a_simd_reduction() -> None:
    [sc] = scalarizations(MATVEC)
    assert sc.var == "j" and sc.target == "y[i]"
    assert ("    for (i = 0; i < n; i++)\n        { if ((0) < (n)) {\n            __typeof__(y[i]) acc_j = y[i];\n"
            "            #pragma omp simd reduction(+:acc_j)\n            for (j = 0; j < n; j++)\n"
            "                acc_j += A[i * n + j] * x[j];\n            y[i] = acc_j;\n        } else j = 0; }\n}") in sc.source


@pytest.mark.parametrize("body", [
    "y[i] += A[i * n + j] * y[i];",  # E reads the element itself
    "y[j] += A[i * n + j] * x[j];",  # a different element every iteration
    "y[i] += A[i * n + j] * y[j];",  # E reads y[j], which is y[i] when j == i
    "y[i] *= A[i * n + j];",  # not a sum
])
def test_illegal_or_other_shapes_get_no_move(body: str) -> None:
    assert scalarizations(MATVEC.replace("y[i] += A[i * n + j] * x[j];", body)) == []


def test_the_element_is_touched_only_when_the_loop_runs() -> None:
    # at i = n - 1 the j loop is empty and the original never touches y[n]: the rewrite must not either
    source = """void k(int n, double *restrict y, const double *restrict a) {
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            y[i + 1] += a[i * n + j];
}
"""
    [sc] = scalarizations(source)
    assert "    for (int i = 0; i < n; i++)\n        { if ((i + 1) < (n)) {\n" in sc.source and "else" not in sc.source
    assert scalarizations(source.replace("for (int j = i + 1; j < n; j++)", "for (int j = n - 1; j > i; j--)")) == []


def test_reads_of_the_same_array_that_never_meet_the_element_are_fine() -> None:
    # lu_rowwise's U part: a[i][j] -= a[i][k] * a[k][j] over k < i, j >= i: neither read is a[i][j]
    source = expand((ROOT / "tasks/loops/lu_rowwise/kernel.c").read_text())
    assert {(sc.var, sc.line + 1) for sc in scalarizations(source)} == {("k", 13), ("k", 18)}


def test_syrk_permutation_comes_with_the_register_sum() -> None:
    source = expand((ROOT / "tasks/loops/syrk_lower/kernel.c").read_text())
    [plain, summed] = sorted(permutation_moves("kernel.c", source, {}, openmp=True), key=lambda m: m.score)
    assert summed.score > plain.score and "then sum into `c[((i) * n + (j))]` in a register" in summed.idea
    assert permutation_moves("kernel.c", source, {}, openmp=False) == [plain]  # the pragma needs OpenMP


@needs_gcc
def test_rewritten_kernels_give_the_same_sums(tmp_path: Path) -> None:
    variants = [sc.source for sc in scalarizations(MATVEC)]
    assert same_results(tmp_path, MATVEC, variants, MATVEC_CALL, "matvec", rtol=1e-12) == "SAME"
    summed = [sc.source for sc in scalarizations(RANK_K)]  # k innermost already: C[i][j] += A[i][k] * A[j][k]
    assert len(summed) == 1
    assert same_results(tmp_path, RANK_K, summed, RANK_K_CALL, "rank_k", rtol=1e-12) == "SAME"


def test_a_name_the_loop_body_declares_in_a_block_is_not_the_outer_one() -> None:
    # s3: `{ int k = n; ... }` then `a[i] += a[j + k]` with the parameter k: a[j + k] may be a[i] (k = 0)
    source = (ROOT / "tests" / "data" / "deps_hostile" / "s3.c").read_text()
    assert scalarizations(source) == []



@pytest.mark.parametrize("name", [
    "r2_f9_scalar_rowptr",  # a row pointer declared in the loop body: X would name the outer pointer
    "r2_f11_scalar_int_trunc",  # an int element summing doubles: the original truncates at every step
    "r2_f14_scalar_atomic",  # a `#pragma omp atomic` on the sum inside a parallel loop
    "r2_f16_scalar_if",  # an affine `if` in the body, which the model folds into the domain
])
def test_no_rewrite_where_the_body_or_element_says_otherwise(name: str) -> None:
    source = expand((ROOT / "tests" / "data" / "deps_hostile" / f"{name}.c").read_text())
    assert scalarizations(source) == []


def test_an_else_after_the_loop_keeps_its_if() -> None:
    [sc] = scalarizations((ROOT / "tests" / "data" / "deps_hostile" / "r2_f4_dangling_else.c").read_text())
    assert "    if (i > 0)\n      { if ((0) < (m)) {" in sc.source and "      } }\n    else\n      c[i] = -1.0;" in sc.source


def test_a_loop_variable_declared_outside_is_left_as_the_loop_leaves_it() -> None:
    # r2_f10: `last[0] = k;` after the loop reads k, which the loop sets to 0 even when it runs no iteration
    [sc] = scalarizations((ROOT / "tests" / "data" / "deps_hostile" / "r2_f10_scalar_zerotrip.c").read_text())
    assert "} else k = 0; }" in sc.source
