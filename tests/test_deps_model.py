"""The polyhedral model on code written in other people's style (issue 27, items 1-6): floor division by constants
with C's truncation, locals set once from parameters, flat subscripts with such strides, privatizable scratch arrays,
sound over-approximations, and "don't know" meaning no parallel move. Small kernels of our own; isl decides."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kernopt.tuner.cloops import analyze
from kernopt.tuner.deps import Nest, nests
from kernopt.tuner.pragmas import dependence_verdicts, pragma_edits


def one(source: str, approximate: bool = False) -> Nest:
    [nest] = nests(source, approximate=approximate)
    assert nest.known, nest.reason
    return nest


def var(nest: Nest, name: str) -> int:
    [index] = [lp.index for lp in nest.loops if lp.var == name]
    return index


PRODUCT = """void k(long n, const double *restrict a, const double *restrict b, double *restrict t) {
    long ni = (9 * n + 7) / 8, nj = n / 2 + 1;
    const long nk = 2 * n;
    for (long i = 0; i < ni; i++)
        for (long j = 0; j < nj; j++)
            for (long k = 0; k < nk; k++)
                t[(i * nk + k) * nj + j] = a[i * nk + k] * b[k * nj + j];
}
"""


def test_quotients_of_locals_set_once_are_parameters_and_flat_strides_delinearize() -> None:
    nest = one(PRODUCT)
    # t[(i * nk + k) * nj + j] is t[i][k][j]: every element written once, no loop carries anything
    assert all(nest.parallel(lp.index) for lp in nest.loops), nest.report()
    assert any(p.startswith("/") for p in nest.params)  # (9 * n + 7) / 8 is a quotient isl defines


def test_a_flat_stride_that_may_not_hold_the_column_does_not_delinearize() -> None:
    # j runs to nj + 1 > nj: t[i * nj + j] of row i reaches into row i + 1, which the next i writes
    nest = nests(PRODUCT.replace("j < nj;", "j < nj + 1;"))[0]
    assert not nest.known and "delinearize" in nest.reason


def test_c_division_truncates_toward_zero() -> None:
    # (n - 7) / 4 at n = 5 is -2 / 4 = 0 in C (floor would be -1): x[i] = x[i], no dependence carried;
    # at n = 3 it is -4 / 4 = -1: x[i] = x[i - 1], carried
    def parallel(cond: str) -> bool | None:
        return one(f"void k(long n, double *restrict x) {{\n    for (long i = 10; i < 100; i++)\n"
                   f"        if ({cond}) x[i] = x[i + (n - 7) / 4] + 1;\n}}\n").parallel(0)

    assert parallel("n == 5") is True
    assert parallel("n == 3") is False
    assert parallel("n == 11") is False  # (11 - 7) / 4 = 1: x[i] = x[i + 1], an anti dependence


def test_a_quotient_of_a_loop_variable_in_a_bound() -> None:
    nest = one("void k(long n, double (*restrict x)[n]) {\n    for (long i = 0; i < n; i++)\n"
               "        for (long j = i / 2; j < n; j++)\n            x[i][j] = x[i / 3][j] + 1;\n}\n".replace("x[i / 3][j]", "x[j][i]"))
    # x[i][j] = x[j][i] for j >= i / 2: i = 2, j = 1 writes x[2][1], which i = 1, j = 2 read before (j >= 0): carried
    assert nest.parallel(var(nest, "i")) is False and nest.parallel(var(nest, "j")) is True
    # for j >= 2 * i + 1 (> i): the elements written (above the diagonal... below it) are never read: parallel
    nest = one("void k(long n, double (*restrict x)[n]) {\n    for (long i = 0; i < n; i++)\n"
               "        for (long j = (4 * i + 2) / 2; j < n; j++)\n            x[i][j] = x[j][i] + 1;\n}\n")
    assert nest.parallel(var(nest, "i")) is True
    # x[i % 2 * n]: a product with a remainder is not affine
    assert nests("void k(long n, double *restrict x) {\n    for (long i = 0; i < n; i++)\n"
                 "        x[(i % 2) * n] = x[i] + 1;\n}\n")[0].known is False


def parallel_i(body: str, header: str = "for (long i = 0; i < n; i++)") -> bool | None:
    return one(f"void k(long n, double *restrict x, const double *restrict y, double (*restrict a)[n]) {{\n"
               f"    {header}\n        {body}\n}}\n").parallel(0)


def test_quotients_and_remainders_of_loop_variables_in_subscripts_and_conditions() -> None:
    assert parallel_i("x[i / 2] += y[i];") is False  # i = 2m and 2m + 1 update one element
    assert parallel_i("if (i % 2 == 0) x[i / 2] = y[i];") is True  # the even i only: one element each
    assert parallel_i("if (i % 2 == 1) x[i / 2] = x[i / 2 + 1] + y[i];") is False  # reads what i + 2 writes
    assert parallel_i("x[i % 4] = y[i];") is False
    assert parallel_i("x[i + 4] = x[i / 2 * 2 + (i % 2) + 4] + y[i];") is True  # reads x[i + 4] itself
    # a red-black sweep: the red points read only black neighbours, so both loops are parallel
    nest = one("void k(long n, double (*restrict a)[n]) {\n    for (long i = 1; i < n - 1; i++)\n"
               "        for (long j = 1; j < n - 1; j++)\n            if ((i + j) % 2 == 0)\n"
               "                a[i][j] = a[i - 1][j] + a[i][j - 1] + a[i + 1][j] + a[i][j + 1];\n}\n")
    assert nest.parallel(0) is True and nest.parallel(1) is True
    # without the colouring it is Gauss-Seidel: both carry
    nest = one("void k(long n, double (*restrict a)[n]) {\n    for (long i = 1; i < n - 1; i++)\n"
               "        for (long j = 1; j < n - 1; j++)\n            if ((i + j) % 2 == 0 || 1)\n"
               "                a[i][j] = a[i - 1][j] + a[i][j - 1] + a[i + 1][j] + a[i][j + 1];\n}\n".replace(
                   "            if ((i + j) % 2 == 0 || 1)\n", ""))
    assert nest.parallel(0) is False and nest.parallel(1) is False


def test_a_quotient_of_unsigned_values_is_dont_know() -> None:
    [nest] = nests("void k(unsigned n, double *restrict x) {\n    long h = n / 2;\n"
                   "    for (long i = 0; i < h; i++)\n        x[i] = x[i + h];\n}\n")
    assert not nest.known and "unsigned" in nest.reason


CONTRACTION = """#define NP 16
void k(int nr, int nq, double A[restrict nr][nq][NP], const double C[restrict NP][NP]) {
    double sum[NP];
    for (int r = 0; r < nr; r++)
        for (int q = 0; q < nq; q++) {
            for (int p = 0; p < NP; p++)
                sum[p] = 0.0;
            for (int s = 0; s < NP; s++)
                for (int p = 0; p < NP; p++)
                    sum[p] += A[r][q][s] * C[s][p];
            for (int p = 0; p < NP; p++)
                A[r][q][p] = sum[p];
        }
}
"""


def test_a_scratch_vector_written_before_it_is_read_is_privatizable() -> None:
    nest = one(CONTRACTION)
    r, q = var(nest, "r"), var(nest, "q")
    assert nest.privatizable(r) == {"sum"} and nest.privatizable(q) == {"sum"}
    assert nest.parallel(r) is False  # shared, every iteration overwrites the same sum
    assert nest.parallel(r, frozenset({"sum"})) is True


@pytest.mark.parametrize("change", [
    ("for (int p = 0; p < NP; p++)\n                sum[p] = 0.0;", "for (int p = 1; p < NP; p++)\n                sum[p] = 0.0;"),
    ("sum[p] = 0.0;", "if (C[0][p] > 0) sum[p] = 0.0;"),  # written only where data say so
    ("sum[p] = 0.0;", "sum[p] = 0.5 * sum[p];"),  # reads the last iteration's value first
])
def test_a_scratch_vector_read_before_it_is_written_is_not_privatizable(change: tuple[str, str]) -> None:
    nest = one(CONTRACTION.replace(*change))
    assert nest.privatizable(var(nest, "r")) == frozenset()
    assert nest.parallel(var(nest, "r")) is False


def test_a_scratch_vector_read_at_another_element_already_written_is_privatizable() -> None:
    nest = one(CONTRACTION.replace("A[r][q][p] = sum[p];", "A[r][q][p] = sum[NP - 1 - p];"))
    assert nest.privatizable(var(nest, "r")) == {"sum"}


def test_a_scratch_vector_read_after_the_loop_is_not_privatizable() -> None:
    source = CONTRACTION.replace("        }\n}\n", "        }\n    C[0][0] = sum[0];\n}\n").replace(
        "const double C[restrict NP][NP]", "double C[restrict NP][NP]")
    nest = nests(source)[0]
    assert nest.known and nest.privatizable(var(nest, "r")) == frozenset()


def test_a_scalar_is_written_first_only_where_every_iteration_sets_it_before_reading_it() -> None:
    def first(body: str) -> frozenset[str] | None:
        return one("void k(int n, const double *restrict x, double *restrict y) {\n    double t = 0;\n"
                   f"    for (int i = 0; i < n; i++) {{\n        {body}\n    }}\n}}\n").written_first(0)

    assert first("t = x[i]; y[i] = t * t;") == {"t", "y"}
    assert first("if (x[i] > 0) t = x[i]; y[i] = t;") == {"y"}  # may keep the last iteration's t
    assert first("y[i] = t; t = x[i];") == {"y"}
    assert first("x[i] > 0 ? (t = x[i]) : 0; y[i] = t;") == {"y"}  # a write in a conditional expression may not run
    assert first("x[i] > 0 && (t = x[i]); y[i] = t;") == {"y"}


def test_privatizable_only_for_arrays_of_the_function() -> None:
    # a scratch passed in by the caller: the caller may read what the last iteration left in it
    source = CONTRACTION.replace("double sum[NP];\n", "").replace(
        "const double C[restrict NP][NP])", "const double C[restrict NP][NP], double *restrict sum)")
    nest = one(source)
    assert nest.privatizable(var(nest, "r")) == frozenset()


CSR = """void k(int n, const int *restrict rowptr, const int *restrict col, const double *restrict v,
       const double *restrict x, double *restrict y) {
    for (int i = 0; i < n; i++) {
        double s = 0.0;
        for (int k = rowptr[i]; k < rowptr[i + 1]; k++)
            s += v[k] * x[col[k]];
        y[i] = s;
    }
}
"""


def test_a_data_dependent_bound_is_over_approximated() -> None:
    assert not nests(CSR)[0].known  # exact only: don't know
    nest = one(CSR, approximate=True)
    assert nest.approximated and nest.parallel(var(nest, "i")) is True and nest.parallel(var(nest, "k")) is False
    assert nest.bands() == []  # no loop move rewrites loops whose domain is not their own
    # a bound that reads what the nest writes stays don't know
    assert not nests(CSR.replace("k < rowptr[i + 1]", "k < (int)y[i]"), approximate=True)[0].known


def test_writes_through_subscripts_outside_the_model_conflict_with_everything() -> None:
    scatter = ("void k(int n, const int *restrict idx, double *restrict x, double *restrict y) {\n"
               "    for (int i = 0; i < n; i++)\n        x[idx[i]] = y[i];\n}\n")
    assert not nests(scatter)[0].known
    assert one(scatter, approximate=True).parallel(0) is False  # two i may write one element
    # a read through one conflicts with the loop's own writes of x
    gather = ("void k(int n, const int *restrict idx, double *restrict x) {\n"
              "    for (int i = 0; i < n; i++)\n        x[i] = x[idx[i]] + 1;\n}\n")
    assert one(gather, approximate=True).parallel(0) is False
    # a histogram's updates: parallel once the reduction clause takes care of the array
    hist = ("void k(int n, const int *restrict bin, int *restrict h) {\n"
            "    for (int i = 0; i < n; i++)\n        h[bin[i]] += 1;\n}\n")
    nest = one(hist, approximate=True)
    assert nest.parallel(0) is False and nest.parallel(0, frozenset({"h"})) is True
    # over-approximated writes never make a privatizable array
    priv = CONTRACTION.replace("sum[p] = 0.0;", "sum[(int)C[0][p] % NP] = 0.0;")
    nest = one(priv, approximate=True)
    assert nest.privatizable(var(nest, "r")) == frozenset()


def test_a_subscript_outside_the_model_leaves_the_others_exact() -> None:
    source = ("void k(long n, long m, const int *restrict idx, const double *restrict x, double (*restrict a)[m]) {\n"
              "    for (long i = 0; i < n; i++) {\n        int r = idx[i];\n"
              "        for (long j = 0; j < m; j++)\n            BODY;\n    }\n}\n")
    nest = one(source.replace("BODY", "a[r][j] += x[i * m + j]"), approximate=True)
    assert nest.parallel(var(nest, "j")) is True  # one row r per i, column j: each j its own element
    assert nest.parallel(var(nest, "i")) is False  # two i may have one r
    nest = one(source.replace("BODY", "a[r][j] = a[r][j + 1] + x[j]").replace("j < m;", "j < m - 1;"), approximate=True)
    assert nest.parallel(var(nest, "j")) is False  # reads the column the next j writes, in whatever row
    nest = one(source.replace("BODY", "a[r][j] = a[idx[j]][j] + x[j]"), approximate=True)
    assert nest.parallel(var(nest, "j")) is True  # any row, but column j only: no other j touches it
    assert nest.written_first(var(nest, "j")) == frozenset()  # a free row is no must-write


OUTSIDE = """#define N 64
double f(double);
void k(int n, double *restrict x) {
    for (int i = 0; i < n; i++)
        x[i] = f(x[i]);
}
"""


def test_dont_know_means_no_parallel_move() -> None:
    moves = [idea for _, _, idea, _ in pragma_edits(OUTSIDE)]
    assert not any("parallel for" in m or "simd" in m for m in moves), moves


def test_the_contraction_gets_a_private_copy_of_its_scratch_vector() -> None:
    loops = analyze(CONTRACTION)
    verdicts = dependence_verdicts(CONTRACTION, loops)
    r = next(lp.index for lp in loops if lp.var == "r")
    assert verdicts.parallel[r] is True and verdicts.arrays[r] == ("sum",)
    ideas = [idea for _, _, idea, _ in pragma_edits(CONTRACTION)]
    assert any("parallel for private(sum)` on the r loop" in i for i in ideas), ideas
    # the s loop carries sum[p] += ...: only as an array reduction
    assert all("reduction(+:sum)" in i for i in ideas if "the s loop" in i and "parallel for" in i)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")
def test_the_private_copy_computes_what_the_serial_loop_does(tmp_path: Path) -> None:
    main = """
#include <stdio.h>
void k(int nr, int nq, double A[restrict nr][nq][NP], const double C[restrict NP][NP]);
int main(void) {
    static double A[7][5][NP], C[NP][NP];
    for (int r = 0; r < 7; r++) for (int q = 0; q < 5; q++) for (int p = 0; p < NP; p++) A[r][q][p] = (r * 31 + q * 7 + p) % 13 - 6;
    for (int s = 0; s < NP; s++) for (int p = 0; p < NP; p++) C[s][p] = (s * 5 + p * 3) % 11 - 5;
    k(7, 5, A, C);
    for (int r = 0; r < 7; r++) for (int q = 0; q < 5; q++) for (int p = 0; p < NP; p++) printf("%g\\n", A[r][q][p]);
    return 0;
}
"""
    edits = [new for new, _, idea, _ in pragma_edits(CONTRACTION) if new and "private(sum)` on the r loop" in idea]
    outputs = []
    for name, source in (("serial", CONTRACTION), ("parallel", edits[0])):
        (tmp_path / f"{name}.c").write_text(source + main)
        subprocess.run(["gcc", "-O2", "-fopenmp", "-o", str(tmp_path / name), str(tmp_path / f"{name}.c")], check=True)
        env = {"OMP_NUM_THREADS": "4", "PATH": "/usr/bin:/bin"}
        outputs.append(subprocess.run([str(tmp_path / name)], check=True, capture_output=True, text=True, env=env).stdout)
    assert outputs[0] == outputs[1] and len(outputs[0].split()) == 7 * 5 * 16


ALLOCATED = """#include <stdlib.h>
void k(int n, double *restrict A, const double *restrict C) {
    int nr = n, nq = n + n / 4, np = (3 * n) / 2;
    double *sum = (double *)malloc(np * sizeof(double));
    for (int r = 0; r < nr; r++)
        for (int q = 0; q < nq; q++) {
            for (int p = 0; p < np; p++)
                sum[p] = 0.0;
            for (int s = 0; s < np; s++)
                for (int p = 0; p < np; p++)
                    sum[p] += A[(r * nq + q) * np + s] * C[s * np + p];
            for (int p = 0; p < np; p++)
                A[(r * nq + q) * np + p] = sum[p];
        }
    free(sum);
}
"""


def test_a_block_from_an_allocator_is_an_object_of_its_own_and_privatizable() -> None:
    nest = one(ALLOCATED)
    assert nest.privatizable(var(nest, "r")) == {"sum"}
    assert nest.allocation("sum") == "double *sum = (double *)malloc(np * sizeof(double));"
    # read after the loop: the last iteration's values live on
    nest = one(ALLOCATED.replace("    free(sum);", "    A[0] = sum[0];\n    free(sum);"))
    assert nest.privatizable(var(nest, "r")) == frozenset()
    # a size the function changes before the loop: the declaration cannot run again there
    nest = one(ALLOCATED.replace("    for (int r = 0; r < nr; r++)\n", "    np = 1;\n    for (int r = 0; r < nr; r++)\n", 1))
    assert nest.allocation("sum") is None and nest.privatizable(var(nest, "r")) == frozenset()
    # a pointer that may hold the block too: the block is not known apart from it (tmp[i] and alias[n - 1 - i] race)
    held = ("#include <stdlib.h>\nvoid k(int n) {\n    double *tmp = malloc(n * sizeof *tmp);\n    double *alias = tmp;\n"
            "    for (int i = 0; i < n; i++) {\n        tmp[i] = i;\n        alias[n - 1 - i] = 0.0;\n    }\n    free(tmp);\n}\n")
    assert not nests(held)[0].known
    assert one(held.replace("    double *alias = tmp;\n", "").replace("alias[n - 1 - i]", "tmp[n - 1 - i]")).parallel(0) is False
    # a local pointer that is not a fresh block may point into A: don't know
    assert not nests(ALLOCATED.replace("(double *)malloc(np * sizeof(double))", "A + 1"))[0].known


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")
def test_each_thread_allocates_its_own_scratch_block(tmp_path: Path) -> None:
    main = """
#include <stdio.h>
int main(void) {
    int n = 9, nq = n + n / 4, np = (3 * n) / 2;
    static double A[9 * 11 * 13], C[13 * 13];
    for (int x = 0; x < n * nq * np; x++) A[x] = (x * 7) % 13 - 6;
    for (int x = 0; x < np * np; x++) C[x] = (x * 5) % 11 - 5;
    k(n, A, C);
    for (int x = 0; x < n * nq * np; x++) printf("%g\\n", A[x]);
    return 0;
}
"""
    [edit] = [new for new, _, idea, _ in pragma_edits(ALLOCATED) if new and "`#pragma omp for` on the r loop" in idea]
    assert "#pragma omp parallel\n" in edit and edit.count("malloc") == 2 and edit.count("free(sum)") == 2
    outputs = []
    for name, source in (("serial", ALLOCATED), ("parallel", edit)):
        (tmp_path / f"{name}.c").write_text(source + main)
        subprocess.run(["gcc", "-O2", "-fopenmp", "-Wall", "-Werror", "-Wno-unknown-pragmas", "-o", str(tmp_path / name),
                        str(tmp_path / f"{name}.c")], check=True)
        env = {"OMP_NUM_THREADS": "4", "PATH": "/usr/bin:/bin"}
        outputs.append(subprocess.run([str(tmp_path / name)], check=True, capture_output=True, text=True, env=env).stdout)
    assert outputs[0] == outputs[1] and len(outputs[0].split()) == 9 * 11 * 13
