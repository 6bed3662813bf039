"""kernopt.h's ko_fill_uniform (issue 19: large input fills dominated evaluations of memory-bound tasks): the
same values from every compiler, flag set and CPU variant, those of its definition (splitmix64 of a counter),
and a harness that uses it runs under the monitor like any other. Its speed is measured by bench/fill_speed.py,
not here."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from kernopt.candidate import Candidate
from kernopt.config import EvalConfig
from kernopt.evaluators.c_family.evaluator import CFamilyEvaluator
from kernopt.sandbox import get_sandbox
from kernopt.task import load_task
from tests.conftest import SMALL_GEMM, enterable_tmpdir

HEADER_DIR = Path(__file__).resolve().parent.parent / "kernopt" / "evaluators" / "c_family" / "c"
M64 = (1 << 64) - 1
PROGRAM = """
#include <stdio.h>
#include <stdlib.h>
#include "kernopt.h"
int ko_setup(long n, ko_buf *b) { (void)n; (void)b; return 0; }
void ko_fill(long n, uint64_t s) { (void)n; (void)s; }
void ko_call(long n) { (void)n; }
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    double *p = (double *)malloc((size_t)n * sizeof *p);
    ko_fill_uniform(p, n, 0xC0FFEEull, -2.5, 4.0);
    fwrite(p, sizeof *p, (size_t)n, stdout);
    return 0;
}
"""


def reference(count: int, seed: int, lo: float, hi: float) -> list[float]:
    """The definition in kernopt.h, in Python: splitmix64 of the (i+1)-th counter, 52 bits into [1, 2)."""
    out = []
    for i in range(count):
        z = (seed + (i + 1) * 0x9E3779B97F4A7C15) & M64
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        z ^= z >> 31
        d = struct.unpack("<d", struct.pack("<Q", (z >> 12) | 0x3FF0000000000000))[0]
        out.append(lo + (hi - lo) * (d - 1.0))
    return out


def builds() -> list[list[str]]:
    cands = [["gcc", "-O3"], ["gcc", "-O0"], ["gcc", "-O3", "-march=native"], ["clang", "-O3"],
             ["clang", "-O3", "-march=native"], ["g++", "-x", "c++", "-O3"]]
    return [c for c in cands if shutil.which(c[0])]


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_fill_uniform_gives_the_same_values_on_every_build(tmp_path: Path) -> None:
    src = tmp_path / "fill.c"
    src.write_text(PROGRAM)
    count = 4099  # not a multiple of any vector width
    want = struct.pack(f"<{count}d", *reference(count, 0xC0FFEE, -2.5, 4.0))
    for i, cmd in enumerate(builds()):
        exe = tmp_path / f"fill{i}"
        subprocess.run([*cmd, f"-I{HEADER_DIR}", "-Wall", "-Werror", str(src), "-o", str(exe)], check=True)
        got = subprocess.run([str(exe), str(count)], check=True, capture_output=True).stdout
        assert got == want, f"{' '.join(cmd)} gives other values than kernopt.h's definition"
    values = struct.unpack(f"<{count}d", want)
    assert all(-2.5 <= v < 4.0 for v in values) and len(set(values)) == count


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_a_harness_filled_with_it_runs_under_the_monitor(tmp_path: Path) -> None:
    """Function multi-versioning resolves at load time (an IFUNC in harness.o): the driver, the monitor and the
    seccomp filter must take it, and outputs must still depend on every call's seed."""
    task_dir = tmp_path / "task"
    shutil.copytree(SMALL_GEMM, task_dir)
    harness = task_dir / "harness.c"
    old = harness.read_text()
    loop = ("    uint64_t s = seed;\n    for (long i = 0; i < n * n; i++) a[i] = ko_rng_uniform(&s, -1.0, 1.0);\n"
            "    for (long i = 0; i < n * n; i++) b[i] = ko_rng_uniform(&s, -1.0, 1.0);\n")
    assert loop in old
    harness.write_text(old.replace(loop, "    ko_fill_uniform(a, n * n, seed, -1.0, 1.0);\n"
                                         "    ko_fill_uniform(b, n * n, seed ^ 0x5DEECE66Dull, -1.0, 1.0);\n"))
    task = load_task(task_dir)
    with enterable_tmpdir("kernopt-fill-") as work:
        ev = CFamilyEvaluator(task, get_sandbox("local"), EvalConfig(rounds=2), work)  # type: ignore[call-arg]
        try:
            ok = ev.evaluate(Candidate(files={task.kernel: (task_dir / task.kernel).read_text()}))
            assert ok.status == "ok", f"{ok.status}: {ok.reason}"
            zeros = ("void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {\n"
                     "    for (long i = 0; i < n * n; i++) c[i] = a[i] * 0.0 + b[0] * 0.0;\n}\n")
            bad = ev.evaluate(Candidate(files={task.kernel: zeros}))
            assert bad.status == "wrong_answer", f"{bad.status}: {bad.reason}"
        finally:
            ev.close()
