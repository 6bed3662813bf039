"""C from isl's schedules (kernopt/tuner/codegen.py over schedule.py), checked by running it: every schedule
option set's code for the kernels written here (a product with its init inside the i-j loops, a chain of two
products sharing a temporary, the same chain with sizes derived from n by quotients, an in-place Gauss-Seidel
sweep with its time loop inside, a triangular update with a local sum, a 1-D stencil over two arrays) is compiled
with the original (gcc -O2 -fopenmp -ffp-contract=off) and must give bit-identical arrays at n = 1, 7, 33, 70 with
1 and 2 threads: the schedules keep every dependence in order, and a parallel loop carries none, so nothing is
reassociated and threads change nothing."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kernopt.tuner.codegen import apply, scheduled_sources
from kernopt.tuner.policy import schedule_moves
from kernopt.tuner.schedule import Options, models, schedule

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")

MM_INIT = """void k(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++) {
            c[i * n + j] = 0.0;
            for (long k = 0; k < n; k++)
                c[i * n + j] += a[i * n + k] * b[k * n + j];
        }
}
"""
MM_CALL = "{f}(n, a, b, c);"

CHAIN = """void k(long n, const double *restrict a, const double *restrict b, const double *restrict c,
       double *restrict t, double *restrict d) {
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++) {
            t[i * n + j] = 0.0;
            for (long k = 0; k < n; k++)
                t[i * n + j] += a[i * n + k] * b[k * n + j];
        }
    /* the second product reads the first's result */
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++) {
            d[i * n + j] = 0.0;
            for (long k = 0; k < n; k++)
                d[i * n + j] += t[i * n + k] * c[k * n + j];
        }
}
"""
CHAIN_CALL = "{f}(n, a, b, c, d, e);"

# the chain with sizes derived from n the way other people's code writes them (tasks/derived): quotients, locals
DERIVED_CHAIN = """void k(long n, const double *restrict a, const double *restrict b, const double *restrict c,
       double *restrict t, double *restrict d) {
    long nj = (7 * n + 7) / 8, nk = (3 * n) / 4 + 1, nl = n / 2 + 1;
    for (long i = 0; i < n; i++)
        for (long j = 0; j < nj; j++) {
            t[i * nj + j] = 0.0;
            for (long k = 0; k < nk; k++)
                t[i * nj + j] += a[i * nk + k] * b[k * nj + j];
        }
    for (long i = 0; i < n; i++)
        for (long l = 0; l < nl; l++) {
            d[i * nl + l] = 0.0;
            for (long j = 0; j < nj; j++)
                d[i * nl + l] += t[i * nj + j] * c[j * nl + l];
        }
}
"""

SWEEP = """void k(long n, double (*restrict u)[n]) {
    for (long t = 0; t < 3; t++)
        for (long i = 1; i < n - 1; i++)
            for (long j = 1; j < n - 1; j++)
                u[i][j] = 0.2 * (u[i - 1][j] + u[i][j - 1] + u[i][j] + u[i + 1][j] + u[i][j + 1]);
}
"""
SWEEP_CALL = "{f}(n, (double (*)[n])a);"

TRIANGLE = """void k(long n, double beta, double *restrict c, const double *restrict a) {
    for (long i = 0; i < n; i++)
        for (long j = 0; j <= i; j++) {
            double s = 0.0;
            for (long k = 0; k < n; k++)
                s += a[i * n + k] * a[j * n + k];
            c[i * n + j] = beta * c[i * n + j] + s;
        }
}
"""
TRIANGLE_CALL = "{f}(n, 0.5, c, a);"

# independent recurrences stored interleaved (tasks/loops/tridiag_soa's shape): a time loop over a rod loop, with
# forward and backward sweeps over the cells inside; element s of cell i at i * n + s
RODS = """void k(long n, const double *restrict lo, const double *restrict di, double *restrict x, double *restrict cp) {
    for (int t = 0; t < 3; t++) {
        for (long s = 0; s < n; s++) {
            cp[s] = lo[s] / (2.0 + di[s]);
            x[s] = x[s] / (2.0 + di[s]);
        }
        for (long i = 1; i < n; i++)
            for (long s = 0; s < n; s++) {
                long p = i * n + s;
                double denom = 2.0 + di[p] - lo[p] * cp[p - n];
                cp[p] = lo[p] / denom;
                x[p] = (x[p] - lo[p] * x[p - n]) / denom;
            }
        for (long i = n - 2; i >= 0; i--)
            for (long s = 0; s < n; s++)
                x[i * n + s] -= cp[i * n + s] * x[(i + 1) * n + s];
    }
}
"""
RODS_CALL = "{f}(n, a, b, c, d);"

# a rank-k update of a lower triangle (tasks/loops/syrk_lower's shape): the scaling runs once per (i, j), before the
# p loop; isl's fused schedule runs it at p == 0
SYRK = """void k(long n, double beta, double *restrict c, const double *restrict a) {
    for (long i = 0; i < n; i++) {
        for (long j = 0; j <= i; j++)
            c[i * n + j] *= beta;
        for (long p = 0; p < n; p++)
            for (long j = 0; j <= i; j++)
                c[i * n + j] += a[i * n + p] * a[j * n + p];
    }
}
"""

# the local's block under an affine `if`: not a loop's body, so the statements are scheduled one by one and the local
# is hoisted (one variable, private in a parallel loop); and a product whose k is declared outside its loop
TRIANGLE_IF = """void k(long n, double beta, double *restrict c, const double *restrict a) {
    for (long i = 0; i < n; i++)
        for (long j = 0; j <= i; j++) {
            double s = 0.0;
            if (j > 0) {
                double t = a[i * n + j];
                s += t * a[j * n + j];
            }
            c[i * n + j] = beta * c[i * n + j] + s;
        }
}
"""
# the local in a block of its own inside the loop body: hoisted, and the k loop stays inside its lifetime
TRIANGLE_BLOCK = TRIANGLE.replace("j <= i; j++) {\n", "j <= i; j++) {\n            {\n").replace(
    "        }\n}", "            }\n        }\n}")
# a loop under an `if`: deps.py's domain of its statements does not carry the condition, so no model
LOOP_UNDER_IF = TRIANGLE.replace("j <= i; j++) {\n", "j < n; j++)\n            if (j <= i) {\n").replace(
    "        }\n}", "            }\n}")
SHARED_K = """void k(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    long k;
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++) {
            double s = 0.0;
            for (k = 0; k < n; k++)
                s += a[i * n + k] * b[k * n + j];
            c[i * n + j] = s;
        }
}
"""

STENCIL = """void k(long n, double *restrict x, double *restrict y) {
    for (long t = 0; t < 4; t++) {
        for (long i = 1; i < n - 1; i++)
            y[i] = (x[i - 1] + x[i] + x[i + 1]) / 3.0;
        for (long i = 1; i < n - 1; i++)
            x[i] = y[i];
    }
}
"""
STENCIL_CALL = "{f}(n, a, b);"

# runs the original (k_0) and each variant on copies of the same five n x n arrays at each size; prints a line for
# each variant and size where any array differs from the original's in any bit
HARNESS = """#include <stdio.h>
#include <stdlib.h>
#include <string.h>
%(kernels)s
static void run(int v, long n, double *a, double *b, double *c, double *d, double *e) {
    switch (v) {
%(cases)s
    }
}
int main(void) {
    long sizes[] = {1, 7, 33, 70};
    int bad = 0;
    for (int s = 0; s < 4; s++) {
        long n = sizes[s];
        size_t bytes = sizeof(double) * (size_t)(n * n);
        double *in[5], *out[5], *ref[5];
        srand(7 + (unsigned)n);
        for (int m = 0; m < 5; m++) {
            in[m] = malloc(bytes); out[m] = malloc(bytes); ref[m] = malloc(bytes);
            for (long i = 0; i < n * n; i++) in[m][i] = rand() / (double)RAND_MAX - 0.5;
        }
        for (int v = 0; v < %(count)d; v++) {
            for (int m = 0; m < 5; m++) memcpy(out[m], in[m], bytes);
            run(v, n, out[0], out[1], out[2], out[3], out[4]);
            for (int m = 0; m < 5; m++) {
                if (v == 0) memcpy(ref[m], out[m], bytes);
                else if (memcmp(ref[m], out[m], bytes)) { printf("variant %%d differs at n = %%ld\\n", v, n); bad = 1; break; }
            }
        }
        for (int m = 0; m < 5; m++) { free(in[m]); free(out[m]); free(ref[m]); }
    }
    printf("%%s\\n", bad ? "DIFF" : "SAME");
    return 0;
}
"""


def same_results(tmp_path: Path, original: str, variants: list[str], call: str, name: str) -> str:
    """'SAME' when every variant's arrays are bit-identical to the original's at every size, with 1 and 2 threads."""
    kernels, cases = [], []
    for v, source in enumerate([original, *variants]):
        kernels.append(re.sub(r"\bvoid k\(", f"void k_{v}(", source, count=1))
        cases.append(f"        case {v}: {call.format(f=f'k_{v}')} break;")
    src, exe = tmp_path / f"{name}.c", tmp_path / name
    src.write_text(HARNESS % {"kernels": "\n".join(kernels), "cases": "\n".join(cases), "count": len(variants) + 1})
    build = subprocess.run(["nice", "-n", "19", "gcc", "-std=gnu11", "-O2", "-ffp-contract=off", "-fopenmp", "-Wall",
                            "-Werror", "-Wno-unused-variable", "-o", str(exe), str(src)], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[:3000]
    outs = []
    for threads in ("1", "2"):
        run = subprocess.run(["nice", "-n", "19", str(exe)], check=True, capture_output=True, text=True,
                             env={**os.environ, "OMP_NUM_THREADS": threads}, timeout=300)
        outs.append(run.stdout.strip().splitlines()[-1] if "DIFF" not in run.stdout else run.stdout)
    return "SAME" if outs == ["SAME", "SAME"] else "\n".join(outs)


def variants(source: str) -> list[tuple[str, str]]:
    """(what the schedule does, the new source) for every distinct option set."""
    return [("; ".join(s.notes), new) for s, new in scheduled_sources(source, openmp=True)]


@needs_gcc
@pytest.mark.parametrize(("name", "source", "call", "least"), [
    ("mm_init", MM_INIT, MM_CALL, 8), ("chain", CHAIN, CHAIN_CALL, 8), ("derived_chain", DERIVED_CHAIN, CHAIN_CALL, 8),
    ("sweep", SWEEP, SWEEP_CALL, 3),
    ("triangle", TRIANGLE, TRIANGLE_CALL, 3), ("triangle_if", TRIANGLE_IF, TRIANGLE_CALL, 1),
    ("syrk", SYRK, TRIANGLE_CALL, 3), ("rods", RODS, RODS_CALL, 3),
    ("triangle_block", TRIANGLE_BLOCK, TRIANGLE_CALL, 1),
    ("shared_k", SHARED_K, MM_CALL, 3), ("stencil", STENCIL, STENCIL_CALL, 3)])
def test_every_schedule_gives_bit_identical_results(tmp_path: Path, name: str, source: str, call: str, least: int) -> None:
    found = variants(source)
    assert len(found) >= least, [w for w, _ in found]
    assert same_results(tmp_path, source, [new for _, new in found], call, name) == "SAME"


def test_matrix_product_tiles_fuses_the_init_and_runs_the_tile_loop_in_parallel() -> None:
    found = dict(variants(MM_INIT))
    tiled = [w for w in found if "tile 64x64x64 over i, k, j" in w and "parallel for on the outer loop over i" in w]
    assert tiled, list(found)
    code = found[tiled[0]]
    assert "#pragma omp parallel for\n        for (long ko_c0 = 0; ko_c0 < n; ko_c0 += 64) {" in code
    # j innermost: the stride-1 order, the init guarded inside the fused band
    assert code.count("for (long ko_c") == 6 and "c[((ko_c0 + ko_c3)) * n + ((ko_c2 + ko_c5))] = 0.0;" in code
    assert "#define KOS_MIN(a, b)" in code and code.rstrip().endswith("#undef KOS_MIN\n    }\n}")


def test_the_chain_is_one_model_and_a_schedule_fuses_the_two_products() -> None:
    [model] = models(CHAIN)
    assert model.count == 2 and len(model.stmts) == 4
    fused = [w for w, _ in variants(CHAIN) if w.startswith("fuse the 2 nests of k")]
    apart = [w for w, _ in variants(CHAIN) if w.startswith("keep apart the 2 nests of k")]
    assert fused and apart


def test_derived_sizes_print_as_their_c_text() -> None:
    """A quotient size (`(7 * n + 7) / 8`, isl's parameter `/0`) prints as its own C text in the bounds; a remainder,
    which has none, gives no model (no move) rather than a name the compiler would not know."""
    found = variants(DERIVED_CHAIN)
    assert any(w.startswith("fuse the 2 nests of k") for w, _ in found), [w for w, _ in found]
    for what, code in found:
        assert "_Q_" not in code and "p_" not in code, (what, code)
        assert "((7 * n + 7) / 8)" in code and "((3 * n) / 4)" in code, (what, code)
    remainder = DERIVED_CHAIN.replace("nl = n / 2 + 1", "nl = n % 5 + 1")
    second = remainder[remainder.index("    for (long i = 0; i < n; i++)\n        for (long l"):]
    assert [m.count for m in models(remainder)] == [1]  # the first product alone: the second's size is a remainder
    apart = variants(remainder)
    assert apart and all(code.endswith(second) for _, code in apart)


def test_unroll_and_jam_keeps_the_init_out_of_the_innermost_loop() -> None:
    """The strip-mined band's loops are separated: the k == 0 iteration (where the init runs) is a loop of its own,
    so the innermost loop of the product has no `if (k == 0)` in it (tasks/derived/chain2_ab, the nests apart and
    unrolled by 4, -march=native, one `kernopt eval` each: 2.65x with the guard inside, 3.50x without)."""
    [model] = models(MM_INIT)
    s = schedule(model, Options(unroll=2))
    assert s is not None and "unroll-and-jam i by 2" in s.notes
    code = apply(s, MM_INIT)
    assert code is not None and "== 0" not in code
    assert "for (long ko_c1 = 1; ko_c1 < n; ko_c1 += 1) {" in code


def test_the_in_place_sweep_is_tiled_only_after_skewing_and_runs_as_a_wavefront() -> None:
    [model] = models(SWEEP)
    s = schedule(model, Options(tile=32, wavefront=True))
    assert s is not None and any("wavefront" in n for n in s.notes)
    # skewed: the time loop's distance 1 in i and j made non-negative, so the band is tilable
    assert s.notes[1] == "tile 32x32x32 over t, t + i, t + j", s.notes
    code = apply(s, SWEEP)
    assert code is not None and code.count("#pragma omp parallel for") == 1
    # the sweep's own loops carry dependences: no untiled schedule runs anything in parallel
    plain = schedule(model, Options())
    assert plain is not None and not any(n.startswith("parallel") for n in plain.notes)


def test_a_local_block_moves_whole_and_its_shared_loop_variable_is_private() -> None:
    for what, code in variants(TRIANGLE):
        assert re.search(r"\{\n( +)double s = 0\.0;\n\1for \(long k = 0; k < n; k\+\+\)\n\1    s \+= ", code), (what, code)
    [(what, code)] = [(w, c) for w, c in variants(SHARED_K) if "tile 64x64" in w]
    assert what.startswith("reschedule the nest at line 3 of k; tile 64x64 over i, j; parallel for on the outer loop")
    assert "#pragma omp parallel for private(k)\n" in code and "for (k = 0; k < n; k++)" in code


def test_a_local_outside_a_loop_body_is_hoisted_and_private() -> None:
    found = variants(TRIANGLE_IF)
    assert found
    for what, code in variants(TRIANGLE_BLOCK):
        assert "    double s;\n" in code and "s = 0.0;\n" in code and "x32x32" not in what  # k stays untiled
    for what, code in found:
        assert "    double s;\n        double t;\n" in code and "double s = 0.0" not in code and "s = 0.0;" in code
        if "#pragma omp parallel for" in code:
            assert re.search(r"#pragma omp parallel for( schedule\(dynamic(, 16)?\))? private\(s, t\)\n", code), what


def test_a_statement_fused_at_one_iteration_gets_a_loop_of_its_own() -> None:
    """isl's fused schedule of the syrk shape runs `c *= beta` at p == 0 inside the p-j band; the untiled loops are
    `separate`, so that iteration is a loop of its own and the innermost loop has no guard (tasks/loops/syrk_lower:
    the guarded form measured 0.70x)."""
    [model] = models(SYRK)
    s = schedule(model, Options())
    assert s is not None and s.notes[0] == "reschedule the nest at line 2 of k"
    code = apply(s, SYRK)
    assert code is not None and "== 0" not in code, code
    assert "for (long ko_c1 = 1; ko_c1 < n; ko_c1 += 1) {" in code


def test_a_tiled_rod_loop_sinks_below_the_sweeps() -> None:
    """Tiling the time and rod loops of interleaved recurrences, the rod loop of each tile goes innermost under each
    sweep (isl's band sink): a block of rods stays in cache for all time steps, and every innermost loop is stride-1
    over the rods; the loop over blocks is the parallel one (tasks/loops/tridiag_soa, one `kernopt eval`: 1.75x
    where the unsunk tiles measured 0.27x and per-rod sweeps, the old "s innermost" schedule, 0.25x)."""
    every = variants(RODS)
    found = [(w, c) for w, c in every if "tile 64x64" in w and "the s loop of each tile innermost" in w]
    assert found, [w for w, _ in every]
    for what, code in found:
        par = re.search(r"#pragma omp parallel for\n +for \(long (ko_c\d) = 0; \1 < n; \1 \+= 64\) \{", code)
        assert par, (what, code)
        rods = f"<= KOS_MIN(63, ((n - {par.group(1)}) - 1));"
        lines = code.splitlines()
        statements = [k for k, line in enumerate(lines) if re.search(r"^ +(x|cp)\[.*\] (-)?= ", line)]
        assert len(statements) == 5, code
        for k in statements:  # the loop right around each statement is the tile's rod loop
            loop = next(line for line in reversed(lines[:k]) if "for (long" in line)
            assert rods in loop, (what, lines[k], loop)
    # untiled, the s loop sinks too: each sweep step runs over all the rods in parallel
    [(what, code)] = [(w, c) for w, c in every if w.startswith("reschedule the nest at line 2 of k; s innermost for "
                                                                "stride-1 accesses, below the loops inside; parallel")]
    lines = code.splitlines()
    for k in [k for k, line in enumerate(lines) if re.search(r"^ +(x|cp)\[.*\] (-)?= ", line)]:
        at = max(j for j in range(k) if "for (long" in lines[j])
        assert re.search(r"for \(long (ko_c\d) = 0; \1 < n; \1 \+= 1\)", lines[at]), (lines[k], lines[at])
        assert lines[at - 1].strip() == "#pragma omp parallel for", code


def test_a_parallel_loop_over_a_triangle_is_scheduled_dynamically() -> None:
    """A parallel loop whose iterations do uneven work (an inner loop bounded by it at one end) gets
    `schedule(dynamic, 16)`, a tile loop `schedule(dynamic)`; a rectangular one, tiled (its point loops clipped by a
    `min` with the tile size) or unrolled (its last strip guarded by `n >= c0 + 2`), keeps the static default."""
    for what, code in variants(SYRK):
        if "parallel for" not in what:
            continue
        clause = "schedule(dynamic)" if "tile" in what or "unroll" in what else "schedule(dynamic, 16)"
        assert f"#pragma omp parallel for {clause}\n" in code, (what, code)
    mm = variants(MM_INIT)
    assert any("tile" in w for w, _ in mm) and any("unroll" in w for w, _ in mm)
    for what, code in mm:
        assert "schedule(" not in code, (what, code)


def test_outside_the_model_there_is_no_move() -> None:
    calls = MM_INIT.replace("c[i * n + j] = 0.0;", "c[i * n + j] = f(i);")
    assert models(calls) == [] and schedule_moves("k.c", calls, {"k.c": calls}, True) == []
    assert models(LOOP_UNDER_IF) == []
    local_array = MM_INIT.replace("c[i * n + j] = 0.0;", "double w[2]; w[0] = 0.0; c[i * n + j] = w[0];")
    assert models(local_array) == []
    # a loop variable declared outside its loop and read after the nest keeps no final value: no move
    after = MM_INIT.replace("    for (long i = 0; i < n; i++)\n", "    long i;\n    for (i = 0; i < n; i++)\n").replace(
        "        }\n}", "        }\n    c[0] = i;\n}")
    assert models(after) == []


def test_schedule_moves_name_what_they_do_and_rank_as_the_moves_they_combine() -> None:
    moves = schedule_moves("k.c", MM_INIT, {"k.c": MM_INIT}, True)
    assert len(moves) >= 8 and len({m.changes["files"]["k.c"] for m in moves}) == len(moves)  # type: ignore[index]
    ranked = sorted(moves, key=lambda m: -m.score)
    # permuted for stride 1 and parallel, untiled: the permutation and the parallel for in one move, ranked above both
    best = ranked[0]
    assert best.idea == ("isl schedule: reschedule the nest at line 2 of k; j innermost for stride-1 accesses; "
                         "parallel for on i (checked against the dependences)") and best.score == 150.0
    # the tiled ones stay below -march=native (72) and above the compilers' own optimizers
    tiled = next(m for m in ranked if "tile 64x64x64" in m.idea)
    assert tiled.idea.startswith("isl schedule: reschedule the nest at line 2 of k")
    assert "parallel for on the outer loop over i" in tiled.idea and tiled.kind == "locality"
    assert 64.0 < tiled.score < 72.0
    assert all(m.score < 72.0 for m in ranked[1:] if "parallel for" not in m.idea or "tile" in m.idea or "unroll" in m.idea)
    serial = schedule_moves("k.c", MM_INIT, {"k.c": MM_INIT}, False)
    assert serial and not any("pragma omp" in m.changes["files"]["k.c"] for m in serial)  # type: ignore[index]
