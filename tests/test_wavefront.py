"""The block wavefront move (kernopt/tuner/wavefront.py): where the analysis allows it, and that the generated
schedule computes bit-identical results with several threads."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kernopt.task import load_task
from kernopt.tuner.policy import TunerPolicy
from kernopt.tuner.wavefront import wavefronts
from tests.conftest import REPO
from tests.test_tuner import state_for

GS = (REPO / "tasks/openmp/gauss_seidel/kernel.c").read_text()
SOR = (REPO / "tasks/loops/sor_f32/kernel.c").read_text()
# reads the upper-right neighbour new: distance (1, -1), not fully permutable, so no block wavefront
NINE_POINT = """void k(long n, double *restrict u) {
    for (long i = 1; i < n - 1; i++)
        for (long j = 1; j < n - 1; j++)
            u[i * n + j] = 0.2 * (u[(i - 1) * n + j + 1] + u[(i - 1) * n + j] + u[i * n + j - 1] + u[i * n + j + 1] + u[(i + 1) * n + j]);
}
"""


def test_offered_on_in_place_sweeps_only() -> None:
    assert [(w.loops, w.size) for w in wavefronts(GS)] == [(("i", "j"), 64), (("i", "j"), 128)]  # under the time loop
    assert [w.loops for w in wavefronts(SOR)] == [("i", "j"), ("i", "j")]
    assert wavefronts(NINE_POINT) == []
    for name in ("gemm", "jacobi2d", "heat3d", "trisolve"):  # a parallel loop exists, or the band is not permutable
        assert wavefronts((REPO / "tasks/openmp" / name / "kernel.c").read_text()) == [], name


def test_the_tuner_proposes_it_first_on_gauss_seidel() -> None:
    task = load_task(REPO / "tasks/openmp/gauss_seidel")
    first = TunerPolicy().propose(state_for(task, cores=2), 3)
    assert first[0].idea.startswith("run the i-j loops (line 9) as a block wavefront: 64x64 tiles"), [c.idea for c in first]


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
@pytest.mark.parametrize("name, source, ctype", [("gauss_seidel", GS, "double"), ("sor_f32", SOR, "float")])
def test_bit_identical_with_threads(name: str, source: str, ctype: str, tmp_path: Path) -> None:
    """Tiles of 4 (many partial tiles and anti-diagonals at small n), 3 threads: every element equal to the
    serial sweep's, byte for byte."""
    new = wavefronts(source, sizes=(4,))[0].source.replace(f"void {name}(", f"void {name}_wave(")
    call = "(n, u, f)" if name == "gauss_seidel" else "(n, 1.3f, f, u)"
    main = f"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(void) {{
    long sizes[] = {{1, 2, 3, 5, 6, 7, 9, 13, 33, 70}};
    for (int s = 0; s < 10; s++) {{
        long n = sizes[s];
        {ctype} *u = malloc(n * n * sizeof *u), *v = malloc(n * n * sizeof *v), *f = malloc(n * n * sizeof *f);
        for (long i = 0; i < n * n; i++) {{ u[i] = v[i] = ({ctype})((i * 7919) % 1000) / 999; f[i] = ({ctype})((i * 104729) % 997) / 996; }}
        {name}{call}; {name}_wave{call.replace('u', 'v')};
        if (memcmp(u, v, n * n * sizeof *u)) {{ printf("differs at n=%ld\\n", n); return 1; }}
        free(u); free(v); free(f);
    }}
    return 0;
}}
"""
    (tmp_path / "k.c").write_text(source + "\n" + new + main)
    subprocess.run(["gcc", "-O2", "-fopenmp", "k.c", "-o", "k"], cwd=tmp_path, check=True)
    r = subprocess.run(["./k"], cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "3"})
    assert r.returncode == 0, r.stdout + r.stderr
