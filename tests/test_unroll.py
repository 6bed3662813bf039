"""Unroll-and-jam decided by dependence analysis (kernopt/tuner/unroll.py) and its tuner move: which loops
it unrolls, that the rest of the source is kept, and that every variant compiles and gives bit-identical
results to the original (gcc, one program per kernel that runs the original and each variant on the same
random data at n = 1, 7, 33, 65). Bit-identical because the copies are the original statements and every
dependence keeps its order: nothing is reassociated (-ffp-contract=off keeps gcc from contracting
differently in the two versions)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kernopt.tuner.policy import unroll_moves
from kernopt.tuner.unroll import unroll_jams
from tests.test_deps import JACOBI

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")

GEMM_IKJ = """void k(int n, double alpha, double C[n][n], double A[n][n], double B[n][n]) {
    for (int i = 0; i < n; i++)
        for (int k = 0; k < n; k++)
            for (int j = 0; j < n; j++)
                C[i][j] += alpha * A[i][k] * B[k][j];
}
"""
GEMM_IKJ_CALL = "{f}(n, 1.5, (double (*)[n])c, (double (*)[n])a, (double (*)[n])b);"

GEMM_IKJ_FLAT = """void k(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    long i, j, k;
    for (i = 0; i < n; i++) {
        for (k = 0; k < n; k++) {
            for (j = 0; j < n; j++) {
                c[i * n + j] += a[i * n + k] * b[k * n + j];
            }
        }
    }
}
"""
FLAT_CALL = "{f}(n, a, b, c);"

JACOBI_2D = """void k(int n, double (*restrict a)[n], double (*restrict b)[n]) {
    for (int i = 1; i < n - 1; i++)
        for (int j = 1; j < n - 1; j++)
            b[i][j] = 0.2 * (a[i][j] + a[i - 1][j] + a[i + 1][j] + a[i][j - 1] + a[i][j + 1]);
}
"""
JACOBI_2D_CALL = "{f}(n, (double (*)[n])a, (double (*)[n])c);"
JACOBI_FLAT_CALL = "{f}(n, a, c);"

MATVEC = """void k(int n, const double *restrict A, const double *restrict x, double *restrict y) {
    int i, j;
    for (i = 0; i < n; i++)
        for (j = 0; j < n; j++)
            y[i] += A[i * n + j] * x[j];
}
"""
MATVEC_CALL = "{f}(n, a, x, y);"

RANK_K = """void k(int n, double alpha, double C[restrict n][n], const double A[restrict n][n]) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k <= n - 1; k++)
                C[i][j] += alpha * A[i][k] * A[j][k];
}
"""
RANK_K_CALL = "{f}(n, 0.5, (double (*)[n])c, (const double (*)[n])a);"

# runs the original (k_0) and every variant (k_1, ...) on copies of the same inputs at each size and
# prints one line per variant and size whose outputs c and y differ from the original's in any bit
HARNESS = """#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
%(kernels)s
static int differ(const double *r, const double *v, size_t count) {  /* bitwise, or beyond RTOL where it is set */
    if (RTOL == 0.0) return memcmp(r, v, count * sizeof(double)) != 0;
    for (size_t i = 0; i < count; i++) if (!(fabs(r[i] - v[i]) <= RTOL * fabs(r[i]) + 1e-300)) return 1;
    return 0;
}
static void run(int v, int n, double *a, double *b, double *c, double *x, double *y) {
    switch (v) {
%(cases)s
    }
}
int main(void) {
    int sizes[] = {1, 7, 33, 65};
    int bad = 0;
    for (int s = 0; s < 4; s++) {
        int n = sizes[s];
        size_t nn = (size_t)n * n, bytes = sizeof(double) * nn, vbytes = sizeof(double) * n;
        double *a = malloc(bytes), *b = malloc(bytes), *c0 = malloc(bytes), *x = malloc(vbytes), *y0 = malloc(vbytes);
        double *c = malloc(bytes), *y = malloc(vbytes), *rc = malloc(bytes), *ry = malloc(vbytes);
        srand(11 + n);
        for (size_t i = 0; i < nn; i++) { a[i] = rand() / (double)RAND_MAX; b[i] = rand() / (double)RAND_MAX; c0[i] = rand() / (double)RAND_MAX; }
        for (int i = 0; i < n; i++) { x[i] = rand() / (double)RAND_MAX; y0[i] = rand() / (double)RAND_MAX; }
        for (int v = 0; v < %(count)d; v++) {
            memcpy(c, c0, bytes); memcpy(y, y0, vbytes);
            run(v, n, a, b, c, x, y);
            if (v == 0) { memcpy(rc, c, bytes); memcpy(ry, y, vbytes); }
            else if (differ(rc, c, nn) || differ(ry, y, (size_t)n)) { printf("variant %%d differs at n = %%d\\n", v, n); bad = 1; }
        }
        free(a); free(b); free(c0); free(x); free(y0); free(c); free(y); free(rc); free(ry);
    }
    printf("%%s\\n", bad ? "DIFF" : "SAME");
    return 0;
}
"""


def same_results(tmp_path: Path, original: str, variants: list[str], call: str, name: str, rtol: float = 0.0) -> str:
    """Compile the original and its variants into one program (gcc -O2 -fopenmp) and run it: 'SAME' when
    every variant's outputs are bit-identical to the original's at every size (within rtol where it is set)."""
    kernels, cases = [], []
    for v, source in enumerate([original, *variants]):
        assert re.search(r"\bvoid k\(", source)
        kernels.append(re.sub(r"\bvoid k\(", f"void k_{v}(", source, count=1))
        cases.append(f"        case {v}: {call.format(f=f'k_{v}')} break;")
    src, exe = tmp_path / f"{name}.c", tmp_path / name
    src.write_text(HARNESS % {"kernels": "\n".join(kernels), "cases": "\n".join(cases), "count": len(variants) + 1})
    build = subprocess.run(["nice", "-n", "19", "gcc", "-std=gnu11", "-O2", "-ffp-contract=off", "-fopenmp", "-Wall", "-Werror",
                            f"-DRTOL={rtol!r}", "-o", str(exe), str(src), "-lm"], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    out = subprocess.run(["nice", "-n", "19", str(exe)], check=True, capture_output=True, text=True,
                         env={"OMP_NUM_THREADS": "2"}).stdout
    return out.strip().splitlines()[-1] if "DIFF" not in out else out


def test_gemm_ikj_unrolls_i_and_k_by_2_and_4() -> None:
    found = unroll_jams(GEMM_IKJ)
    assert [(u.var, u.inner, u.factor, u.parallel) for u in found] == [
        ("i", "j", 2, True), ("i", "j", 4, True), ("k", "j", 2, False), ("k", "j", 4, False)]
    i4 = found[1]
    assert i4.assumed == (("C", "A"), ("C", "B"))
    assert i4.source == """void k(int n, double alpha, double C[n][n], double A[n][n], double B[n][n]) {
    for (int i = 0; i < n - 3; i += 4)
        for (int k = 0; k < n; k++)
            for (int j = 0; j < n; j++) {
                C[i][j] += alpha * A[i][k] * B[k][j];
                C[i + 1][j] += alpha * A[i + 1][k] * B[k][j];
                C[i + 2][j] += alpha * A[i + 2][k] * B[k][j];
                C[i + 3][j] += alpha * A[i + 3][k] * B[k][j];
            }
    for (int i = n - n % 4; i < n; i++)
        for (int k = 0; k < n; k++)
            for (int j = 0; j < n; j++)
                C[i][j] += alpha * A[i][k] * B[k][j];
}
"""
    k2 = found[2]  # k inside i: the i loop's body becomes the main k loop and its remainder, in braces
    assert """    for (int i = 0; i < n; i++) {
        for (int k = 0; k < n - 1; k += 2)
            for (int j = 0; j < n; j++) {
                C[i][j] += alpha * A[i][k] * B[k][j];
                C[i][j] += alpha * A[i][k + 1] * B[k + 1][j];
            }
        for (int k = n - n % 2; k < n; k++)
""" in k2.source


def test_flat_gemm_keeps_the_rest_byte_for_byte() -> None:
    u = next(u for u in unroll_jams(GEMM_IKJ_FLAT) if (u.var, u.factor) == ("i", 2))
    assert "c[(i + 1) * n + j] += a[(i + 1) * n + k] * b[k * n + j];" in u.source
    assert u.source.startswith(GEMM_IKJ_FLAT.split("    for (i = 0;")[0] + "    for (i = 0; i < n - 1; i += 2) {\n")
    assert u.source.endswith("    for (i = n - n % 2; i < n; i++) {\n" + GEMM_IKJ_FLAT.split("for (i = 0; i < n; i++) {\n", 1)[1])


def test_jacobi_matvec_and_rank_k_moves() -> None:
    jac = unroll_jams(JACOBI_2D)
    assert [(u.var, u.factor, u.reuse) for u in jac] == [("i", 2, 2), ("i", 4, 2)]  # a[i + 1][j] then a[i][j], twice
    assert "for (int i = n - 1 - (n - 1 - 1) % 2; i < n - 1; i++)" in jac[0].source
    assert [(u.var, u.inner) for u in unroll_jams(MATVEC)] == [("i", "j")] * 2
    assert "y[i + 1] += A[(i + 1) * n + j] * x[j];" in unroll_jams(MATVEC)[0].source
    rank = unroll_jams(RANK_K)
    assert [(u.var, u.inner, u.factor) for u in rank] == [("i", "k", 2), ("i", "k", 4), ("j", "k", 2), ("j", "k", 4)]
    assert "for (int k = 0; k <= n - 1; k++)" in rank[0].source  # the jammed loop's header is unchanged


def test_illegal_unknown_and_triangular_nests_get_no_move() -> None:
    skewed = """void k(int n, double (*restrict a)[n], const double *restrict b) {
    for (int i = 1; i < n; i++)
        for (int j = 0; j < n - 1; j++)
            a[i][j] = a[i - 1][j + 1] + b[j];
}
"""
    assert unroll_jams(skewed) == []  # distance (1, -1): i cannot move inside j
    assert [u.var for u in unroll_jams(skewed.replace("a[i - 1][j + 1]", "a[i - 1][j]"))] == ["i", "i"]
    assert unroll_jams(GEMM_IKJ_FLAT.replace("a[i * n + k]", "a[b[k] > 0 ? i : k]").replace("c[i * n + j]", "c[i * i + j]")) == []
    triangular = GEMM_IKJ.replace("for (int k = 0; k < n; k++)", "for (int k = 0; k <= i; k++)")
    assert unroll_jams(triangular) == []


def test_no_reuse_no_move() -> None:
    assert unroll_jams("""void k(int n, double (*restrict a)[n], double (*restrict b)[n]) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            b[i][j] = 2.0 * a[i][j];
}
""") == []


def test_pragma_on_the_unrolled_loop_stays_on_the_main_loop() -> None:
    source = GEMM_IKJ_FLAT.replace("    for (i = 0;", "    #pragma omp parallel for private(j, k)\n    for (i = 0;")
    u = next(u for u in unroll_jams(source) if (u.var, u.factor) == ("i", 4))
    assert "    #pragma omp parallel for private(j, k)\n    for (i = 0; i < n - 3; i += 4) {" in u.source
    assert u.source.count("#pragma") == 1
    unsigned = GEMM_IKJ_FLAT.replace("long n,", "unsigned long n,")
    u = next(u for u in unroll_jams(unsigned) if (u.var, u.factor) == ("i", 4))
    assert "for (i = 0; i + 3 < n; i += 4)" in u.source  # no `n - 3` that wraps around
    assert not [u for u in unroll_jams(unsigned.replace("    for (i = 0;", "    #pragma omp parallel for\n    for (i = 0;"))
                if u.var == "i"]


def test_parallel_moves_after_unroll_and_jam_are_proven_and_skip_the_remainder() -> None:
    # the next greedy step after an unroll-and-jam: `i += 4` and the remainder's `n - n % 4` are modelled, so a
    # `parallel for` goes where the analysis proves it (gemm's main i loop), not on a loop that carries a dependence
    # (Gauss-Seidel's, which the loop patterns alone used to offer), nor on the remainder's at most 3 rows
    from kernopt.tuner.pragmas import pragma_edits
    from kernopt.tuner.tile import tilings
    from kernopt.tuner.wavefront import wavefronts
    from tests.test_deps import GAUSS_SEIDEL

    gemm = next(u for u in unroll_jams(GEMM_IKJ) if (u.var, u.factor) == ("i", 4)).source
    ideas = [idea for _, _, idea, _ in pragma_edits(gemm)]
    assert "add `#pragma omp parallel for` on the i loop (line 2)" in ideas
    assert not any("parallel for" in idea and "i loop (line 10)" in idea for idea in ideas), ideas  # the remainder
    for u in unroll_jams(GAUSS_SEIDEL):
        assert not any("parallel for" in idea for _, _, idea, _ in pragma_edits(u.source)), u.source
        # nor a wavefront, tiling or unroll-and-jam of the remainder's band (at fd0d33b the tuner spent evaluations on
        # block wavefronts of it; the main loop's `i += 4` is outside the code generation)
        assert wavefronts(u.source) == [] and tilings(u.source) == [] and unroll_jams(u.source) == []


def test_locals_in_the_body_are_renamed_in_the_copies() -> None:
    source = GEMM_IKJ.replace("C[i][j] += alpha * A[i][k] * B[k][j];",
                              "{\n                double t = alpha * A[i][k];\n                C[i][j] += t * B[k][j];\n            }")
    u = next(u for u in unroll_jams(source) if (u.var, u.factor) == ("i", 2))
    assert "double t_1 = alpha * A[i + 1][k];\n                C[i + 1][j] += t_1 * B[k][j];" in u.source


def test_tuner_move() -> None:
    moves = unroll_moves("kernel.c", GEMM_IKJ, {"kernel.c": GEMM_IKJ})
    best = max(moves, key=lambda m: m.score)
    assert best.idea.startswith("unroll-and-jam i by 4 into the j loop (line 2; register blocking")
    assert "C and A" in best.idea and best.kind == "compute"
    assert 72.0 < best.score < 136.0  # below permutation (136 + 8 x gain), above the best flag (72)


@needs_gcc
@pytest.mark.parametrize(("name", "source", "call"), [
    ("gemm_vla", GEMM_IKJ, GEMM_IKJ_CALL), ("gemm_flat", GEMM_IKJ_FLAT, FLAT_CALL), ("jacobi_vla", JACOBI_2D, JACOBI_2D_CALL),
    ("jacobi_flat", JACOBI, JACOBI_FLAT_CALL), ("matvec", MATVEC, MATVEC_CALL), ("rank_k", RANK_K, RANK_K_CALL),
    ("gemm_omp", GEMM_IKJ_FLAT.replace("    for (i = 0;", "    #pragma omp parallel for private(j, k)\n    for (i = 0;"), FLAT_CALL),
    ("gemm_local", GEMM_IKJ.replace("C[i][j] += alpha * A[i][k] * B[k][j];",
                                    "{\n                double t = alpha * A[i][k];\n                C[i][j] += t * B[k][j];\n            }"),
     GEMM_IKJ_CALL),
])
def test_every_variant_compiles_and_gives_identical_results(tmp_path: Path, name: str, source: str, call: str) -> None:
    variants = [u.source for u in unroll_jams(source)]
    assert variants
    assert same_results(tmp_path, source, variants, call, name) == "SAME"


@needs_gcc
def test_a_nest_without_braces_around_it_gets_them(tmp_path: Path) -> None:
    source = MATVEC.replace("    for (i = 0; i < n; i++)\n", "    if (n > 0)\n    for (i = 0; i < n; i++)\n")
    u = unroll_jams(source)[0]
    assert "    if (n > 0) {\n    for (i = 0; i < n - 1; i += 2)\n" in u.source and u.source.endswith("    }\n}\n")
    assert same_results(tmp_path, source, [u.source], MATVEC_CALL, "braces") == "SAME"
