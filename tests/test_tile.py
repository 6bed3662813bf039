"""Cache tiling decided by dependence analysis (kernopt/tuner/tile.py) and its tuner move: which bands and
loops it tiles, pragmas kept or added, and that every variant compiles and gives bit-identical results to
the original at n = 1, 7, 33, 65 (none a multiple of 32, 64 or 128): a fully permutable band keeps every
dependence in order, so nothing is reassociated. The harness is tests/test_unroll.py's."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernopt.tuner.policy import tiling_moves
from kernopt.tuner.tile import tilings
from tests.test_deps import JACOBI, TIME_STENCIL
from tests.test_unroll import (
    FLAT_CALL,
    GEMM_IKJ,
    GEMM_IKJ_CALL,
    GEMM_IKJ_FLAT,
    JACOBI_2D,
    MATVEC,
    MATVEC_CALL,
    RANK_K,
    RANK_K_CALL,
    needs_gcc,
    same_results,
)

GEMM_OMP = GEMM_IKJ_FLAT.replace("    for (i = 0;", "    #pragma omp parallel for private(j, k)\n    for (i = 0;")


def test_gemm_tiles_all_three_loops_with_min_bounds() -> None:
    found = tilings(GEMM_IKJ)
    assert [(t.tiled, t.size, t.parallel, t.pragma) for t in found] == [(("i", "k", "j"), s, True, "") for s in (32, 64, 128)]
    assert found[1].source == """void k(int n, double alpha, double C[n][n], double A[n][n], double B[n][n]) {
    for (int ii = 0; ii < n; ii += 64)
        for (int kk = 0; kk < n; kk += 64)
            for (int jj = 0; jj < n; jj += 64)
                for (int i = ii; i < (ii + 64 < n ? ii + 64 : n); i++)
                    for (int k = kk; k < (kk + 64 < n ? kk + 64 : n); k++)
                        for (int j = jj; j < (jj + 64 < n ? jj + 64 : n); j++)
                            C[i][j] += alpha * A[i][k] * B[k][j];
}
"""


def test_existing_parallel_for_stays_on_the_outermost_tile_loop() -> None:
    t = tilings(GEMM_OMP)[0]
    assert t.pragma == "kept"
    # i is no longer the loop the pragma binds: it joins the private list (j, k were there already)
    assert "    #pragma omp parallel for private(j, k) private(i)\n    for (long ii = 0; ii < n; ii += 32)\n" in t.source
    assert t.source.startswith(GEMM_OMP.split("    #pragma")[0])


def test_parallel_for_added_only_for_openmp_and_a_parallel_outer_tile_loop() -> None:
    assert all(t.pragma == "" for t in tilings(MATVEC))
    t = tilings(MATVEC, openmp=True)[0]
    assert t.pragma == "added" and "    int i, j;\n    #pragma omp parallel for private(i, j)\n    for (int ii = 0;" in t.source
    # k outermost carries the reduction into C: tiled, but no pragma added
    kij = GEMM_IKJ.replace("for (int i = 0; i < n; i++)", "for (int K = 0; K < n; K++)").replace(
        "for (int k = 0; k < n; k++)", "for (int i = 0; i < n; i++)").replace("int K = 0; K < n; K++", "int k = 0; k < n; k++")
    found = tilings(kij, openmp=True)
    assert found and all(not t.parallel and t.pragma == "" for t in found)


def test_rank_k_and_le_bounds() -> None:
    t = tilings(RANK_K)[0]
    assert t.tiled == ("i", "j", "k")
    assert "for (int kk = 0; kk <= n - 1; kk += 32)" in t.source
    assert "for (int k = kk; k <= (kk + 31 < n - 1 ? kk + 31 : n - 1); k++)" in t.source


def test_no_tiling_without_reuse_legality_or_a_rectangular_band() -> None:
    assert tilings(JACOBI_2D) == [] and tilings(JACOBI) == []  # no loop carries temporal reuse
    assert tilings(TIME_STENCIL) == []  # not fully permutable (needs a skew first)
    skewed = """void k(int n, double (*restrict a)[n], const double *restrict b) {
    for (int i = 1; i < n; i++)
        for (int j = 0; j < n - 1; j++)
            a[i][j] = a[i - 1][j + 1] + b[j] + b[i];
}
"""
    assert tilings(skewed) == []  # distance (1, -1): not tilable
    assert [t.tiled for t in tilings(skewed.replace("a[i - 1][j + 1]", "a[i - 1][j]"))] == [("i", "j")] * 3
    assert tilings(GEMM_IKJ.replace("for (int k = 0; k < n; k++)", "for (int k = 0; k <= i; k++)")) == []  # triangular
    collapsed = GEMM_IKJ.replace("    for (int i", "    #pragma omp parallel for collapse(2)\n    for (int i")
    assert tilings(collapsed) == []


def test_tuner_move() -> None:
    moves = tiling_moves("kernel.c", GEMM_OMP, {"kernel.c": GEMM_OMP}, True)
    assert [m.score for m in moves] == [64.0, 66.0, 65.0]
    assert moves[1].idea.startswith("tile the i-k-j loops (line 4) 64x64x64 over i, k, j for cache reuse")
    assert "parallel for stays on the outermost tile loop" in moves[1].idea and moves[1].kind == "locality"


@needs_gcc
@pytest.mark.parametrize(("name", "source", "call", "openmp"), [
    ("gemm_vla", GEMM_IKJ, GEMM_IKJ_CALL, False), ("gemm_flat", GEMM_IKJ_FLAT, FLAT_CALL, True), ("gemm_omp", GEMM_OMP, FLAT_CALL, False),
    ("matvec", MATVEC, MATVEC_CALL, True), ("rank_k", RANK_K, RANK_K_CALL, True), ("rank_k_serial", RANK_K, RANK_K_CALL, False),
])
def test_every_tiling_compiles_and_gives_identical_results(tmp_path: Path, name: str, source: str, call: str, openmp: bool) -> None:
    variants = [t.source for t in tilings(source, openmp=openmp)]
    assert len(variants) == 3
    assert same_results(tmp_path, source, variants, call, name) == "SAME"
