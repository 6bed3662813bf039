"""Guards no other test pinned (issue 16): each test here fails when its guard is removed, and
scripts/mutants.py removes each one on a copy of the tree to prove it."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from kernopt.evaluators import stats
from kernopt.evaluators.c_family.compare import compare
from kernopt.evaluators.c_family.static_gate import check_object
from kernopt.evaluators.result import TimingStats
from kernopt.task import Task, Verify, load_task

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(any(shutil.which(t) is None for t in ("gcc", "nm", "readelf", "objdump")), reason="needs gcc and binutils")
def test_weak_undefined_reference_is_refused(tmp_path: Path) -> None:
    """A weak undefined reference (nm type 'w') to a forbidden function is as much a reference as a strong one:
    the program resolves it to libc's `system` when libc is linked."""
    task = load_task(REPO / "tasks" / "openmp" / "gemm")
    assert isinstance(task, Task)
    src = tmp_path / "kernel.c"
    src.write_text("extern int system(const char *) __attribute__((weak));\n"
                   "void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {\n"
                   "    if (system) system(\"true\");\n    for (long i = 0; i < n * n; i++) c[i] = a[i] + b[i];\n}\n")
    obj = tmp_path / "kernel.o"
    subprocess.run(["gcc", "-O2", "-c", str(src), "-o", str(obj)], check=True, capture_output=True)
    nm, sections, disassembly = (subprocess.run([*cmd, str(obj)], check=True, capture_output=True, text=True).stdout
                                 for cmd in (["nm", "-P"], ["readelf", "-SW"], ["objdump", "-d"]))
    assert re.search(r"^system w", nm, re.M), nm  # weak and undefined
    assert check_object(task, nm, sections, disassembly) == "kernel references system, which kernels may not use"


def _timing(consistent: bool) -> TimingStats:
    base = [[1.0, 1.01, 0.99]] * 7
    cand = [[0.5, 0.505, 0.495]] * 7
    speedup, lo, hi = stats.ratio_of_medians(base, cand)
    return TimingStats(baseline_s=[x for g in base for x in g], candidate_s=[x for g in cand for x in g],
                       baseline_median_s=stats.median(base), candidate_median_s=stats.median(cand), speedup=speedup,
                       ci_low=lo, ci_high=hi, p_value=stats.faster_p_value(base, cand),
                       paired_low=1.5, consistent=consistent)


def test_inconsistent_timing_is_never_significant() -> None:
    """Kernel times the process wall clock does not bear out are not a win, however clear the statistics."""
    assert _timing(consistent=True).significant
    assert not _timing(consistent=False).significant


def test_norm_bound_has_the_atol_floor() -> None:
    """A handful of near-zero outputs (a scalar loss, n=1) is judged by atol, not by pure relative error:
    an error of 1e-13 on a reference of 1e-12 is within atol=1e-12, though 10% in relative norm."""
    tol = Verify(rtol=1e-9, atol=1e-12, norm_rtol=1e-9)  # type: ignore[call-arg]
    ref = np.array([1e-12])
    mismatch, _, norm_err = compare({"r": ref + 1e-13}, {"r": ref}, tol)
    assert norm_err > tol.norm_rtol and mismatch is None, mismatch


def test_bootstrap_resamples_processes_not_calls() -> None:
    """Calls of one process are not independent: with process-level spread of +-20% and almost none within a
    process, the interval must be as wide as the processes make it. Resampling calls would make it narrow."""
    rng = np.random.default_rng(1)
    offsets = (-0.2, -0.1, 0.0, 0.1, 0.2)
    base = [list(1.0 + f + 1e-4 * rng.standard_normal(50)) for f in offsets]
    cand = [list(1.0 + f + 1e-4 * rng.standard_normal(50)) for f in offsets]
    _, lo, hi = stats.ratio_of_medians(base, cand)
    assert hi / lo > 1.2, (lo, hi)  # resampling the 250 calls gives about [0.99, 1.01]
