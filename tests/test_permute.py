"""Loop permutation decided by dependence analysis (kernopt/tuner/permute.py) and its tuner move: which
orders it picks, that it keeps the rest of the source, and that the permuted kernel compiles and gives
the same numbers as the original (gcc, a tiny main on random data)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kernopt.tuner.permute import permutations
from kernopt.tuner.policy import permutation_moves
from tests.test_deps import GAUSS_SEIDEL, GEMM_2D, GEMM_FLAT, JACOBI, TIME_STENCIL, TRISOLVE

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")

GEMM_2D_PLAIN = """void k(int n, double alpha, double beta, double C[n][n], double A[n][n], double B[n][n]) {
    int i, j, k;
    for (i = 0; i < n; i++)
        for (j = 0; j < n; j++)
            C[i][j] *= beta;
    for (i = 0; i < n; i++) {
        for (j = 0; j < n; j++) {
            for (k = 0; k < n; k++) {
                C[i][j] += alpha * A[i][k] * B[k][j];
            }
        }
    }
}
"""

# a main that fills three n x n matrices from a fixed seed, calls k and prints every element
MAIN = """#include <stdio.h>
#include <stdlib.h>
%s
int main(void) {
    int n = 37;
    double *a = malloc(sizeof(double) * n * n), *b = malloc(sizeof(double) * n * n), *c = malloc(sizeof(double) * n * n);
    srand(7);
    for (int i = 0; i < n * n; i++) { a[i] = rand() / (double)RAND_MAX; b[i] = rand() / (double)RAND_MAX; c[i] = rand() / (double)RAND_MAX; }
    %s
    for (int i = 0; i < n * n; i++) printf("%%.17g\\n", c[i]);
    return 0;
}
"""


def run(tmp_path: Path, kernel: str, call: str, name: str) -> str:
    src, exe = tmp_path / f"{name}.c", tmp_path / name
    src.write_text(MAIN % (kernel, call))
    # -O1 -ffp-contract=off: the same arithmetic in both versions (no FMA contraction that may differ by order)
    subprocess.run(["nice", "-n", "19", "gcc", "-std=c11", "-O1", "-ffp-contract=off", "-Wall", "-Werror", "-o", str(exe),
                    str(src), "-lm"], check=True, capture_output=True, text=True)
    return subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout


def test_gemm_flat_becomes_ikj_and_keeps_the_body() -> None:
    [p] = permutations(GEMM_FLAT)
    assert (p.before, p.after, p.gain, p.assumed) == (("i", "j", "k"), ("i", "k", "j"), 1, ())
    assert p.source == GEMM_FLAT.replace("for (long j = 0; j < n; j++)\n            for (long k = 0; k < n; k++)",
                                         "for (long k = 0; k < n; k++)\n            for (long j = 0; j < n; j++)")


def test_array_accumulator_gemm_with_a_beta_nest_permutes_the_product_only() -> None:
    [p] = permutations(GEMM_2D_PLAIN)
    assert p.after == ("i", "k", "j") and p.line == 5
    assert p.assumed == (("C", "A"), ("C", "B"))  # parameters without restrict: assumed, and said so
    head, tail = p.source.split("    for (i = 0; i < n; i++) {", 1)
    assert head == GEMM_2D_PLAIN.split("    for (i = 0; i < n; i++) {", 1)[0]  # the beta nest is untouched
    assert "for (k = 0; k < n; k++) {\n            for (j = 0; j < n; j++) {\n                C[i][j] +=" in tail
    [restricted] = permutations(GEMM_2D)
    assert restricted.after == ("i", "k", "j") and restricted.assumed == ()


@pytest.mark.parametrize("source", [GAUSS_SEIDEL, JACOBI, TRISOLVE, TIME_STENCIL])
def test_nothing_to_gain_or_nothing_legal(source: str) -> None:
    assert permutations(source) == []


def test_illegal_orders_are_never_proposed() -> None:
    # column sweep that must run with i outside: a[i][j] = a[i-1][j+1]: j-i would reverse the dependence (1,-1)
    source = """void k(int n, double (*restrict a)[n]) {
    for (int j = 0; j < n - 1; j++)
        for (int i = 1; i < n; i++)
            a[i][j] = a[i - 1][j + 1] + 1.0;
}
"""
    assert permutations(source) == []  # i innermost is the strided one, but i-j is illegal
    legal = source.replace("a[i - 1][j + 1]", "a[i - 1][j]")
    [p] = permutations(legal)
    assert p.after == ("i", "j")


def test_loops_with_pragmas_keep_their_place() -> None:
    with_outer = GEMM_FLAT.replace("    for (long i", "    #pragma omp parallel for\n    for (long i", 1)
    [p] = permutations(with_outer)
    assert "#pragma omp parallel for\n    for (long i" in p.source and p.after == ("i", "k", "j")
    on_k = GEMM_FLAT.replace("            for (long k", "            #pragma omp simd\n            for (long k", 1)
    assert permutations(on_k) == []  # k would have to leave the innermost place


def test_tuner_move_says_what_it_assumed() -> None:
    [move] = permutation_moves("kernel.c", GEMM_2D_PLAIN, {"kernel.c": GEMM_2D_PLAIN})
    assert move.idea.startswith("permute the i-j-k loops (line 6) to i-k-j") and "C and A" in move.idea
    assert move.kind == "locality" and move.score == 144.0


@needs_gcc
def test_permuted_gemms_compile_and_give_identical_results(tmp_path: Path) -> None:
    flat_call = "k(n, a, b, c);"
    vla_call = "k(n, 1.5, 0.5, (double (*)[n])c, (double (*)[n])a, (double (*)[n])b);"
    for name, source, call in [("flat", GEMM_FLAT, flat_call), ("vla", GEMM_2D_PLAIN, vla_call),
                               ("restrict", GEMM_2D, vla_call)]:
        [p] = permutations(source)
        assert run(tmp_path, p.source, call, name + "_new") == run(tmp_path, source, call, name + "_old"), name


@needs_gcc
def test_a_three_deep_band_with_a_strided_write(tmp_path: Path) -> None:
    # out[j][i] (transposed store) over i-j-k: the best order puts i innermost; the k reduction stays legal
    source = """void k(int n, const double *restrict a, const double *restrict b, double *restrict c) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < 4; k++)
                c[j * n + i] += a[k * n + i] * b[j * n + k];
}
"""
    [p] = permutations(source)
    assert p.after[-1] == "i"
    call = "k(n, a, b, c);"
    assert run(tmp_path, p.source, call, "t_new") == run(tmp_path, source, call, "t_old")


GEMM_BETA_INSIDE = """void k(int n, double alpha, double beta, double C[n][n], double A[n][n], double B[n][n]) {
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) {
            C[i][j] *= beta;
            for (int k = 0; k < n; k++)
                C[i][j] += alpha * A[i][k] * B[k][j];
        }
    }
}
"""


def test_perfectly_nestable_gemm_is_distributed_then_permuted() -> None:
    [p] = permutations(GEMM_BETA_INSIDE)
    assert (p.distributed, p.before, p.after, p.gain) == ("j", ("j", "k"), ("k", "j"), 1)
    assert """        for (int j = 0; j < n; j++) {
            C[i][j] *= beta;
        }
        for (int k = 0; k < n; k++) {
            for (int j = 0; j < n; j++)
                C[i][j] += alpha * A[i][k] * B[k][j];
        }
""" in p.source
    [move] = permutation_moves("kernel.c", GEMM_BETA_INSIDE, {"kernel.c": GEMM_BETA_INSIDE})
    assert move.idea.startswith("split the j loop (line 3) after its first statement(s), then permute the j-k loops to k-j")


def test_distribution_that_would_reverse_a_dependence_is_not_proposed() -> None:
    # the scaling at j reads C[i][j - 1], which the product at j - 1 has finished: splitting j would read it too early
    assert permutations(GEMM_BETA_INSIDE.replace("C[i][j] *= beta;", "C[i][j] *= C[i][j - 1];")) == []


@needs_gcc
def test_distributed_gemm_gives_identical_results(tmp_path: Path) -> None:
    [p] = permutations(GEMM_BETA_INSIDE)
    call = "k(n, 1.5, 0.5, (double (*)[n])c, (double (*)[n])a, (double (*)[n])b);"
    assert run(tmp_path, p.source, call, "d_new") == run(tmp_path, GEMM_BETA_INSIDE, call, "d_old")


@needs_gcc
def test_a_split_loop_that_was_a_bare_loop_body_gets_braces(tmp_path: Path) -> None:
    """`for (i ...)` without braces around its j loop (tasks/loops/gemm_ab): the split's two copies must stay
    inside the i loop (without braces the second fell outside it and did not compile: 'i' undeclared)."""
    bare = GEMM_BETA_INSIDE.replace("    for (int i = 0; i < n; i++) {\n", "    for (int i = 0; i < n; i++)\n", 1)
    bare = bare[:bare.rindex("    }\n}")] + "}\n"
    assert "for (int i = 0; i < n; i++)\n        for (int j" in bare
    [p] = permutations(bare)
    assert p.distributed == "j" and "for (int i = 0; i < n; i++)\n        {\n" in p.source
    call = "k(n, 1.5, 0.5, (double (*)[n])c, (double (*)[n])a, (double (*)[n])b);"
    assert run(tmp_path, p.source, call, "d_new") == run(tmp_path, bare, call, "d_old")


# Triangular two-loop bands (permute._triangular_swap): every visited (i, j) must stay visited, once.
TRIANGLES = {
    # i from the outer variable (plus 0 or 2) to the outer loop's own bound: Cholesky's trailing update
    "lower": """void k(int n, double (*restrict c)[n], const double (*restrict a)[n]) {
    for (long m = 0; m < 3; m++) {
        c[m][m] += 1.0;
        for (long j = m + 1; j < n; j++)
            for (long i = j; i < n; i++)
                c[i][j] -= a[i][m] * a[j][m];
    }
}
""",
    "lower_shifted": """void k(int n, double (*restrict c)[n], const double (*restrict a)[n]) {
    for (int j = 1; j <= n - 1; j++)
        for (int i = j + 2; i < n; i++)
            c[i][j] += 2.0 * a[i][j] + j;
}
""",
    # i from the outer loop's own start up to j (inclusive) or j - 1
    "upper_inclusive": """void k(int n, double (*restrict c)[n], const double (*restrict a)[n]) {
    for (int j = 0; j < n; j++)
        for (int i = 0; i <= j; i++)
            c[i][j] = c[i][j] * 0.5 + a[i][j];
}
""",
    "upper_strict": """void k(int n, double (*restrict c)[n], const double (*restrict a)[n]) {
    for (int j = 3; j < n; j++)
        for (int i = 3; i < j; i++)
            c[i][j] += a[i][j] * i;
}
""",
}


@needs_gcc
@pytest.mark.parametrize("shape", sorted(TRIANGLES))
def test_triangular_bands_are_interchanged_with_the_same_iterations(tmp_path: Path, shape: str) -> None:
    source = TRIANGLES[shape]
    [p] = permutations(source)
    assert p.before[-2:] == ("j", "i") and p.after[-2:] == ("i", "j") and p.gain >= 1, p
    call = "k(n, (double (*)[n])c, (const double (*)[n])a);"
    assert run(tmp_path, p.source, call, shape + "_new") == run(tmp_path, source, call, shape + "_old")


def test_plus_folds_only_a_trailing_binary_constant() -> None:
    from kernopt.tuner.permute import _plus
    assert [_plus(t, c) for t, c in [("n", 1), ("n - 1", 1), ("k + 1", 2), ("n * 2 - 3", 3), ("n * -1", 1),
                                     ("n - -1", 1), ("f(n) - 1", 1), ("a ? b : c", 1), ("i", -2)]] == [
        "n + 1", "n", "k + 3", "n * 2", "n * -1 + 1", "n - -1 + 1", "(f(n) - 1) + 1", "(a ? b : c) + 1", "i - 2"]


def test_triangles_the_swap_does_not_write_keep_their_order() -> None:
    other_bound = TRIANGLES["lower"].replace("i < n; i++)", "i < n - 1; i++)")  # the inner bound differs from the outer's
    assert permutations(other_bound) == []
    other_start = TRIANGLES["upper_strict"].replace("i = 3;", "i = 0;")  # the inner start differs from the outer's
    assert permutations(other_start) == []
    # variables declared outside the loops: their values after the nest would change
    outside = TRIANGLES["upper_strict"].replace("for (int j", "int i, j;\n    for (j").replace("for (int i", "for (i")
    assert outside != TRIANGLES["upper_strict"] and permutations(outside) == []
    unsigned = TRIANGLES["upper_strict"].replace("int j", "size_t j").replace("int i", "size_t i")  # i - c would wrap
    assert permutations(unsigned) == []
    mixed = TRIANGLES["upper_strict"].replace("int i", "long i")
    assert permutations(mixed) == []
    stepped = TRIANGLES["upper_inclusive"].replace("i <= j; i++", "i <= j; i += 2")
    assert permutations(stepped) == []
