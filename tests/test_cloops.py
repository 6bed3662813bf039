"""Loop analysis and pragma insertion (kernopt.tuner.cloops), checked with real gcc."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kernopt.tuner.cloops import Loop, analyze, insert_pragma, rewrite_pragma

ROOT = Path(__file__).resolve().parents[1]
GEMM = (ROOT / "tasks/openmp/gemm/kernel.c").read_text()
needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")


def compiles(tmp_path: Path, source: str, name: str = "k.c") -> str:
    """'' if `gcc -fopenmp -Wall -Werror -c` accepts the source, else its diagnostics."""
    path = tmp_path / name
    path.write_text(source)
    r = subprocess.run(["gcc", "-fopenmp", "-Wall", "-Werror", "-c", str(path), "-o", str(tmp_path / "k.o")],
                       capture_output=True, text=True)
    return "" if r.returncode == 0 else r.stderr or "failed"


def by_var(loops: list[Loop]) -> dict[str, Loop]:
    return {lp.var or "?": lp for lp in loops}


def test_gemm_loops() -> None:
    loops = analyze(GEMM)
    assert [lp.var for lp in loops] == ["i", "j", "k"]
    i, j, k = loops
    assert [lp.depth for lp in loops] == [0, 1, 2]
    assert (i.parent, j.parent, k.parent) == (None, 0, 1)
    assert i.children == (1,) and j.children == (2,) and k.children == ()
    assert all(lp.canonical for lp in loops)
    assert i.perfect and i.inner_var == "j"  # i/j: collapse(2) candidate
    assert not j.perfect  # j's body also declares s and stores c[...]
    assert k.innermost and not i.innermost and not j.innermost
    assert k.reductions == (("+", "s"),)
    assert i.reductions == () and j.reductions == ()  # s is declared inside their bodies
    assert i.private == j.private == k.private == ()
    assert i.indent == "    " and k.indent == " " * 12 and i.line == 2
    assert i.parallelizable and k.simdable and not i.simdable
    assert not i.recurrence and i.uses_var


REDUCTIONS = """
#include <math.h>
double sum(long n, const double *x) { double s = 0; for (long i = 0; i < n; i++) s += x[i]; return s; }
double prod(long n, const double *x) { double p = 1; for (long i = 0; i < n; i++) p *= x[i]; return p; }
double plus(long n, const double *x) { double s = 0; for (long i = 0; i < n; i++) s = s + x[i]; return s; }
double minus(long n, const double *x) { double s = 0; for (long i = 0; i < n; i++) { s -= x[i]; } return s; }
double mx(long n, const double *x) { double m = x[0]; for (long i = 0; i < n; i++) m = fmax(m, x[i]); return m; }
double mx2(long n, const double *x) { double m = x[0]; for (long i = 0; i < n; i++) if (x[i] > m) m = x[i]; return m; }
double mn(long n, const double *x) { double m = x[0]; for (long i = 0; i < n; i++) { if (m > x[i]) { m = x[i]; } } return m; }
long cnt(long n, const double *x) { long c = 0; for (long i = 0; i < n; i++) if (x[i] > 0) c++; return c; }
double alt(long n, const double *x) { double s = 0; for (long i = 0; i < n; i++) s = x[i] - s; return s; }
double scan(long n, double *x) { double s = 0; for (long i = 0; i < n; i++) { s += x[i]; x[i] = s; } return s; }
double *ptr(long n, double *x) { double *p = x; for (long i = 0; i < n; i++) p += 1; return p; }
"""


def test_reductions() -> None:
    got = [lp.reductions for lp in analyze(REDUCTIONS)]
    assert got == [
        (("+", "s"),), (("*", "p"),), (("+", "s"),), (("+", "s"),), (("max", "m"),), (("max", "m"),),
        (("min", "m"),), (("+", "c"),),
        (),  # s = x[i] - s is not a reduction
        (),  # s is also read (prefix sum)
        (),  # pointers are never reduced
    ]


@needs_gcc
def test_reduction_pragmas_compile(tmp_path: Path) -> None:
    src = REDUCTIONS
    for lp in reversed(analyze(REDUCTIONS)):  # bottom-up keeps earlier offsets valid
        clause = "".join(f" reduction({op}:{v})" for op, v in lp.reductions)
        src = insert_pragma(src, lp, f"#pragma omp parallel for{clause}")
    assert src.count("#pragma omp parallel for") == 11
    assert compiles(tmp_path, src) == ""


PRIVATE = """
void priv(long n, const double *x, double *y) {
    double t;
    long j;
    for (long i = 0; i < n; i++) {
        t = 2 * x[i];
        for (j = 0; j < 3; j++) t += 1;
        y[i] = t;
    }
}
void shared(long n, const double *x, double *y) {
    double t = 0;
    for (long i = 0; i < n; i++) {
        y[i] = t;
        t = x[i];
    }
}
void cond(long n, const double *x, double *y) {
    double t = 0;
    for (long i = 0; i < n; i++) {
        if (x[i] > 0) t = x[i];
        y[i] = t;
    }
}
"""


def test_private_detection() -> None:
    priv, inner, shared, cond = analyze(PRIVATE)
    assert priv.private == ("j", "t") and priv.reductions == ()
    assert inner.var == "j" and inner.reductions == (("+", "t"),)
    assert shared.private == () and shared.reductions == ()  # t is read before it is written
    assert cond.private == ()  # the write is conditional


TRIANGULAR = """
void tri(long n, double *a) {
    for (long i = 0; i < n; i++)
        for (long j = 0; j < i; j++)
            a[i * n + j] = 0;
}
void rect(long n, double *a) {
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++)
            a[i * n + j] = 0;
}
void csr(long n, const long *rp, const double *v, double *y) {
    for (long i = 0; i < n; i++) {
        double s = 0;
        for (long k = rp[i]; k < rp[i + 1]; k++) s += v[k];
        y[i] = s;
    }
}
void rec(long n, double *x) {
    for (long i = 1; i < n; i++) x[i] = x[i - 1] + x[i];
}
void steps(long n, double *x) {
    for (int t = 0; t < 10; t++)
        for (long i = 0; i < n; i++) x[i] *= 0.5;
}
"""


def test_triangular_indirect_recurrence() -> None:
    tri, tri_in, rect, _, csr, csr_in, rec, steps, _ = analyze(TRIANGULAR)
    assert tri.triangular and not tri.perfect and tri_in.canonical
    assert rect.perfect and rect.inner_var == "j" and not rect.triangular
    assert csr.indirect and csr_in.indirect and csr_in.reductions == (("+", "s"),)
    assert csr.triangular  # rp[i]: the inner bounds depend on i (schedule(dynamic) territory)
    assert rec.recurrence and not rect.recurrence
    assert not steps.uses_var and steps.perfect


NOT_CANONICAL = """
long f(long n, const double *x) {
    long i;
    for (i = 0; i < n; i++) if (x[i] < 0) break;
    for (long j = 0; j != n; j++) {}
    for (long j = 0; j < n; j++) { if (x[j] < 0) return j; }
    for (long j = 0; j < n; j++) { j += 1; }
    for (long j = 0; j < n; j++) { for (long k = 0; k < n; k++) if (x[k] < 0) break; }
    for (long j = 0; j < n; j += 2) { switch (j) { case 0: break; default: break; } }
    for (long j = n; j >= 0; j--) {}
    for (double x = 0; x < 1; x += 0.5) {}
    for (const double *p = x; p < x + n; p++) {}
    for (size_t u = 0; u < 4; u++) {}
    return i;
}
"""


def test_canonical_form() -> None:
    got = [lp.canonical for lp in analyze(NOT_CANONICAL)]
    # [5]: the k loop that breaks; [8]: a double is no OpenMP loop variable, pointers and size_t are
    assert got == [False, False, False, False, True, False, True, True, False, True, True]


EXISTING = """
void f(long n, double *a, double *b) {
#pragma omp parallel for
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++) a[i * n + j] = b[j];
    #pragma omp parallel
    {
        #pragma omp for schedule(static)
        for (long i = 0; i < n; i++) b[i] *= 2;
    }
    for (long i = 0; i < n; i++) {
        #pragma omp parallel for
        for (long j = 0; j < n; j++) a[i * n + j] += 1;
    }
}
"""


COLLAPSED = """
void f(long n, double *a) {
    #pragma omp parallel for collapse(2)
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++)
            for (long k = 0; k < n; k++) a[k] += a[i * n + j];
    #pragma omp parallel for collapse(2)
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++) a[i * n + j] = 0;
}
"""


def test_collapsed_loops_take_no_simd() -> None:
    i, j, k, i2, j2 = analyze(COLLAPSED)
    assert j.collapsed and not k.collapsed and k.simdable
    assert j2.collapsed and j2.innermost and not j2.simdable and not i.collapsed


def test_existing_pragmas() -> None:
    outer, inner, worksharing, host, nested = analyze(EXISTING)
    assert outer.omp == ("#pragma omp parallel for",) and not outer.parallelizable
    assert inner.enclosing_omp == ("#pragma omp parallel for",) and not inner.parallelizable
    assert inner.simdable  # simd inside a parallel for is fine
    assert worksharing.omp and worksharing.enclosing_omp == ("#pragma omp parallel",)
    assert not worksharing.parallelizable and not worksharing.simdable
    assert not host.parallelizable and host.inner_omp == ("#pragma omp parallel for",)  # no nested regions
    assert not nested.parallelizable and not nested.simdable


@needs_gcc
def test_insertion_compiles(tmp_path: Path) -> None:
    assert compiles(tmp_path, GEMM) == ""
    loops = analyze(GEMM)
    src = insert_pragma(GEMM, loops[2], "omp simd reduction(+:s)")
    src = insert_pragma(src, loops[0], "#pragma omp parallel for collapse(2)")
    assert "    #pragma omp parallel for collapse(2)\n    for (long i" in src
    assert " " * 12 + "#pragma omp simd reduction(+:s)\n" + " " * 12 + "for (long k" in src
    assert compiles(tmp_path, src) == ""
    again = analyze(src)
    assert again[0].omp == ("#pragma omp parallel for collapse(2)",) and again[2].enclosing_omp


ODD = """
void f(long n, double *a) {
    if (n > 0) for (long i = 0; i < n; i++) a[i] = 0;
    for (long i = 0; i < n; i++) for (long j = 0; j < n; j++) a[i * n + j] += 1;
    for (long i = 0; i < n; i++)
        #pragma GCC ivdep
        for (long j = 0; j < n; j++) a[j] += 1;
}
"""


@needs_gcc
@pytest.mark.parametrize("which", range(4))
def test_insertion_odd_layouts_compile(tmp_path: Path, which: int) -> None:
    lp = analyze(ODD)[which]
    pragma = "#pragma omp simd" if lp.innermost else "#pragma omp parallel for"
    src = insert_pragma(ODD, lp, pragma)
    assert any(line.strip() == pragma for line in src.splitlines())
    assert compiles(tmp_path, src) == ""
    assert analyze(src)[which].omp == (pragma,)


def test_loop_with_other_pragma_is_left_alone() -> None:
    outer, ivdep = analyze(ODD)[3:]
    assert ivdep.pragmas == ("#pragma GCC ivdep",) and not ivdep.simdable and not ivdep.parallelizable
    assert ivdep.parent == 3 and ivdep.depth == 1 and outer.children == (4,) and not outer.innermost


def test_pragma_as_unbraced_body_keeps_nesting() -> None:
    src = "void f(long n, double *a) {\n    for (long i = 0; i < n; i++)\n        for (long j = 0; j < n; j++)\n" \
          "            for (long k = 0; k < n; k++) a[k] += a[j];\n}\n"
    src = insert_pragma(src, analyze(src)[1], "#pragma omp simd")
    assert "    for (long i = 0; i < n; i++)\n        #pragma omp simd\n        for (long j" in src
    i, j, k = analyze(src)
    assert j.parent == 0 and j.depth == 1 and j.omp == ("#pragma omp simd",) and not i.innermost
    assert k.enclosing_omp == ("#pragma omp simd",) and not k.simdable and not i.perfect


def test_rewrite_pragma() -> None:
    outer = analyze(EXISTING)[0]
    src = rewrite_pragma(EXISTING, outer, "#pragma omp parallel for schedule(dynamic, 16)")
    assert src is not None and "\n#pragma omp parallel for schedule(dynamic, 16)\n    for (long i" in src
    assert rewrite_pragma(GEMM, analyze(GEMM)[0], "#pragma omp parallel for") is None


def test_unicode_and_non_function_code() -> None:
    src = "/* héllo — ünïcode */\nstatic int t[3];\nvoid f(int n, int *a) {\n  for (int i = 0; i < n; i++) a[i] = t[0];\n}\n"
    (lp,) = analyze(src)
    out = insert_pragma(src, lp, "omp parallel for")
    assert "  #pragma omp parallel for\n  for (int i" in out and out.startswith("/* héllo")
    assert analyze(out)[0].omp == ("#pragma omp parallel for",)


HISTOGRAM = (ROOT / "tasks/openmp/histogram/kernel.c").read_text()
ARRAYS = """
void own(long n, const double *x, double *y) {
    for (long b = 0; b < n; b++) y[b] = 0;
    for (long i = 0; i < n; i++) y[i] += x[i];
}
void reread(long n, const long *key, double *h) {
    for (long b = 0; b < 64; b++) h[b] = 0;
    for (long i = 0; i < n; i++) { h[key[i]] += 1; h[0] = h[1]; }
}
void in_rhs(long n, const long *key, double *h) {
    for (long b = 0; b < 64; b++) h[b] = 0;
    for (long i = 0; i < n; i++) h[key[i]] += h[0];
}
void no_extent(long n, const long *key, long *h) {
    for (long i = 0; i < n; i++) h[key[i]]++;
}
void columns(long n, long m, const double *a, double *col) {
    for (long j = 0; j < m; j++) col[j] = 0;
    for (long i = 0; i < n; i++)
        for (long j = 0; j < m; j++) col[j] -= a[i * m + j];
}
void ops(long n, int nb, const int *key, int *h, float *f, unsigned *g) {
    for (int b = 0; b < nb; ++b) { h[b] = 1; f[b] = 1; g[b] = 0; }
    for (long i = 0; i < n; i++) { h[key[i]] *= 3; f[key[i]] *= 2; g[key[i]] |= 1; }
}
void scope(long n, const long *key, long *h) {
    { long nb = 8; for (long b = 0; b < nb; b++) h[b] = 0; }
    for (long i = 0; i < n; i++) h[key[i]]--;
}
"""


def test_array_reduction_histogram() -> None:
    zero, scatter = analyze(HISTOGRAM)
    assert scatter.array_reductions == (("+", "hist", "NRING * NSECT"),)
    assert zero.array_reductions == () and scatter.reductions == () and scatter.parallelizable
    assert not scatter.recurrence and not scatter.shared


def test_array_reductions() -> None:
    got = {(lp.line, lp.var): lp.array_reductions for lp in analyze(ARRAYS)}
    assert all(v == () for (line, var), v in got.items() if var == "b")  # the extent loops themselves
    reported = {k: v for k, v in got.items() if v}
    assert reported == {
        (18, "i"): (("+", "col", "m"),),  # -= over i: col[j] does not use i
        (23, "i"): (("*", "f", "nb"), ("|", "g", "nb"), ("*", "h", "nb")),
    }
    assert got[(3, "i")] == ()  # y[i]: each iteration its own element, an ordinary parallel write
    assert got[(7, "i")] == () and got[(11, "i")] == ()  # h is read too (elsewhere, in the right side)
    assert got[(14, "i")] == ()  # no loop zeroing h: no extent
    assert got[(19, "j")] == ()  # col[j] with j the loop's own variable
    assert got[(27, "i")] == ()  # nb is not in scope at the i loop


@needs_gcc
def test_array_reduction_pragmas_compile(tmp_path: Path) -> None:
    for source in (HISTOGRAM, ARRAYS):
        src = source
        for lp in reversed(analyze(source)):  # bottom-up keeps earlier offsets valid
            if lp.array_reductions:
                clause = "".join(f" reduction({op}:{a}[:{ext}])" for op, a, ext in lp.array_reductions)
                src = insert_pragma(src, lp, f"#pragma omp parallel for{clause}")
        assert "[:" in src and compiles(tmp_path, src) == ""


# A local accumulator array of constant size, two-dimensional (k-means' centroid sums), beside a 1-D pointer one.
LOCAL_ARRAYS = """#define K 4
#define D 3
void f(long n, const double *p, const int *lab, double *out, int *count, double (*q)[D], long m) {
    double sums[K][D];
    double vla[m][D];
    int plain[K * 2];
    for (int c = 0; c < K; c++) count[c] = 0;
    for (int c = 0; c < K; c++) for (int d = 0; d < D; d++) { sums[c][d] = 0.0; vla[c][d] = 0.0; }
    for (long i = 0; i < n; i++) {
        int b = lab[i];
        count[b]++;
        for (int d = 0; d < D; d++) sums[b][d] += p[i * D + d];
        plain[b % 8] += 1;
    }
    for (long i = 0; i < n; i++) for (int d = 0; d < D; d++) q[lab[i]][d] += p[i * D + d];
    for (long i = 0; i < n; i++) for (int d = 0; d < D; d++) vla[lab[i]][d] += 1.0;
    for (long i = 0; i < K; i++) for (int d = 0; d < D; d++) sums[i][d] += 1.0;
    for (int c = 0; c < K; c++) for (int d = 0; d < D; d++) out[c * D + d] = sums[c][d] + vla[c][d];
}
"""


def test_whole_local_array_reductions() -> None:
    got = {(lp.line, lp.var): lp.array_reductions for lp in analyze(LOCAL_ARRAYS)}
    # sums[b][d] over i, b data-dependent: the whole array; plain is a local array of constant size too
    assert got[(8, "i")] == (("+", "count", "K"), ("+", "plain", ""), ("+", "sums", ""))
    assert got[(14, "i")] == ()  # q is a parameter (a pointer to rows): no size to reduce over
    assert got[(15, "i")] == ()  # a VLA: not a constant-size list item
    assert got[(16, "i")] == ()  # sums[i][d]: each iteration its own row, an ordinary parallel write


@needs_gcc
def test_whole_local_array_reduction_compiles(tmp_path: Path) -> None:
    lp = next(lp for lp in analyze(LOCAL_ARRAYS) if lp.line == 8)
    from kernopt.tuner.pragmas import clauses
    src = insert_pragma(LOCAL_ARRAYS, lp, f"#pragma omp parallel for{clauses(lp)}")
    assert "reduction(+:count[:K], plain, sums)" in src and compiles(tmp_path, src) == ""


def test_rotating_buffers_mark_a_time_loop_and_row_pointers_move_with_their_loop() -> None:
    wave = """void f(long n, float *w, const float *c) {
    float (*lev[3])[n];
    for (int q = 0; q < 3; q++) lev[q] = (float (*)[n])(w + q * n * n);
    for (int t = 0; t < 24; t++) {
        float (*cur)[n] = lev[(t + 1) % 3], (*next)[n] = lev[(t + 2) % 3];
        for (long i = 1; i < n - 1; i++)
            for (long j = 1; j < n - 1; j++)
                next[i][j] = cur[i - 1][j] + cur[i + 1][j] + c[i * n + j] * cur[i][j];
    }
}
"""
    t = next(lp for lp in analyze(wave) if lp.var == "t")
    assert not t.uses_var  # t only picks buffers modulo 3: its iterations reuse them
    q = next(lp for lp in analyze(wave) if lp.var == "q")
    assert q.uses_var
    rows = """void f(long rows, const double *x, double *y) {
    for (long r = 0; r < rows; r++) {
        double *yr = y + r * 64;
        double s = 0.0;
        for (int c = 0; c < 64; c++) { yr[c] = x[r * 64 + c] * 2.0; s += yr[c]; }
        for (int c = 0; c < 64; c++) yr[c] /= s;
    }
}
"""
    r = next(lp for lp in analyze(rows) if lp.var == "r")
    assert not r.recurrence and r.uses_var  # yr[c] is row r's own element: yr is declared from r
    # an index that differs from the write's through the row pointer: the row's extent is unknown, so it may be
    # another row's element (yr[c - 64] is row r - 1's): a recurrence, as the flat y[(r - 1) * 64 + c] is
    for shifted in (rows.replace("yr[c] /= s;", "yr[c] /= yr[c - 64];"), rows.replace("yr[c] /= s;", "yr[c] /= yr[c + 1];")):
        assert next(lp for lp in analyze(shifted) if lp.var == "r").recurrence
    # only a pointer distinct per iteration moves: y + idx[r] * 64, y + (r / 2) * 64 need not be
    for init in ("y + idx[r] * 64", "y + (r / 2) * 64"):
        other = rows.replace("y + r * 64", init).replace("double *y)", "double *y, const long *idx)")
        assert next(lp for lp in analyze(other) if lp.var == "r").recurrence, init
    assert not next(lp for lp in analyze(rows.replace("y + r * 64", "&y[r * 64]")) if lp.var == "r").recurrence
    ring = """void f(long n, long start, long m, const double *src, double *buf) {
    for (long i = 0; i < n; i++) buf[(start + i) % m] = src[(start + i) % m];
}
"""
    assert next(lp for lp in analyze(ring) if lp.var == "i").uses_var  # % m, a variable: no time loop


GUARDED = """
void gram(long n, long m, const double *u, double *s) {
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++) {
            s[i * n + j] = 0.0;
            if (j <= i)
                for (long c = 0; c < m; c++) s[i * n + j] += u[i * m + c] * u[j * m + c];
        }
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++)
            if (u[i] > 0.0) s[i * n + j] = 0.0;
}
"""


def test_a_loop_run_only_under_a_condition_on_the_outer_variable_is_uneven_work() -> None:
    """`if (j <= i) for (c ...)`: row i does i + 1 dot products, as a triangular loop's bounds would make it: the
    parallel for on i gets schedule(dynamic) first. A condition that guards no loop is not that."""
    gram, _, _, plain, _ = analyze(GUARDED)
    assert gram.var == "i" and gram.triangular
    assert plain.var == "i" and not plain.triangular
