"""`kernopt task check`: does a task directory define a sound problem?

Checks: it loads; the harness and baseline build; the baseline runs at every check size and at
sizes from the random range; outputs are finite and depend on the inputs (two seeds differ); the
baseline is deterministic across thread/rank counts; the timing size is measurable (0.2-2 s is the
target band; outside it is a warning, below 1 ms an error).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kernopt.config import EvalConfig
from kernopt.errors import InfraError
from kernopt.evaluators.c_family import Binary, CFamilyEvaluator
from kernopt.evaluators.compare import compare, load_outputs
from kernopt.sandbox import Sandbox
from kernopt.task import Task


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    warning: bool = False


def check_task(task: Task, sandbox: Sandbox, progress: Callable[[str], None] = lambda _: None) -> list[Check]:
    ev = CFamilyEvaluator(task, sandbox, EvalConfig(), Path(tempfile.mkdtemp(prefix="kernopt-check-")))
    try:
        with ev.session():  # docker: one container for the whole check
            return _check(task, ev, progress)
    finally:
        ev.close()


def _check(task: Task, ev: CFamilyEvaluator, progress: Callable[[str], None]) -> list[Check]:
    checks = [Check("load", True, f"{task.target} task, kernel {task.kernel}, functions {', '.join(task.functions)}")]
    progress("building harness and baseline")
    try:
        base = ev.baseline_binary()
    except InfraError as e:
        return [*checks, Check("build", False, str(e))]
    checks.append(Check("build", True, f"baseline builds with {task.compiler} {' '.join(task.build.cflags)}"))
    progress("running the baseline at check sizes")
    lo, hi = task.sizes.random
    sizes = sorted(set(task.sizes.check) | {lo, hi})
    seeds = [11, 12, 13, 14, 15]
    run, d, r = ev.run_driver(Binary(base, 1, 1, None), sizes, seeds, False, ev.config.verify_timeout_s)
    if not (r.ok and run.complete):
        return [*checks, Check("run", False, f"baseline failed at sizes {sizes}: exit {r.returncode}, "
                               f"{'timed out' if r.timed_out else (r.stderr.strip().splitlines() or ['no output'])[-1]}")]
    checks.append(Check("run", True, f"baseline runs at sizes {sizes} × {len(seeds)} seeds"))
    checks += _output_checks(task, run, d)
    if task.uses_openmp or task.uses_mpi:
        progress("checking the baseline is deterministic across thread/rank counts")
        k = max(task.verify.ranks if task.uses_mpi else task.verify.threads)
        run2, d2, r2 = ev.run_driver(Binary(base, k, k, None), sizes, seeds, False, ev.config.verify_timeout_s)
        detail = f"baseline gives the same outputs at 1 and {k} {'ranks' if task.uses_mpi else 'threads'}"
        ok = r2.ok and run2.complete
        if ok:
            for n in sizes:
                for s in seeds:
                    f1 = next(c.file for c in run.calls if c.n == n and c.seed == s)
                    f2 = next(c.file for c in run2.calls if c.n == n and c.seed == s)
                    m, _, _ = compare(load_outputs(d2, f2, run2.layouts[n]), load_outputs(d, f1, run.layouts[n]), task.verify)
                    if m:
                        ok, detail = False, f"baseline disagrees with itself at {k}: {m.message}"
        else:
            detail = f"baseline fails at {k} threads/ranks: exit {r2.returncode}"
        checks.append(Check("deterministic", ok, detail))
        shutil.rmtree(d2, ignore_errors=True)
    shutil.rmtree(d, ignore_errors=True)
    progress(f"timing the baseline at n={task.sizes.timing}")
    run, d, r = ev.run_driver(Binary(base, task.timing.threads, task.timing.ranks, None), [task.sizes.timing],
                              [1, 2], True, task.timing.timeout_s, warmup=1, reps=2)
    shutil.rmtree(d, ignore_errors=True)
    if not (r.ok and run.complete):
        checks.append(Check("timing", False, f"baseline at timing size {task.sizes.timing} failed "
                            f"({'timed out' if r.timed_out else f'exit {r.returncode}'})"))
    else:
        t = float(np.median([c.time for c in run.calls if not c.warmup]))
        if t < 1e-3:
            checks.append(Check("timing", False,
                                f"baseline takes {t * 1e3:.3f} ms at n={task.sizes.timing}: too short to time; raise sizes.timing"))
        elif not 0.2 <= t <= 2.0:
            checks.append(Check("timing", False, f"baseline takes {t:.3f} s per call at n={task.sizes.timing}; aim for 0.2-2 s", warning=True))
        else:
            checks.append(Check("timing", True, f"baseline takes {t:.3f} s per call at n={task.sizes.timing}"))
    return checks


def _output_checks(task: Task, run: object, d: Path) -> list[Check]:
    from kernopt.evaluators.compare import DriverRun

    assert isinstance(run, DriverRun)
    out: list[Check] = []
    nonfinite, constant = [], []
    for n in sorted(run.layouts):
        calls = [c for c in run.calls if c.n == n]
        arrays = [load_outputs(d, c.file, run.layouts[n]) for c in calls]
        for c, a in zip(calls, arrays, strict=True):
            for name, v in a.items():
                if np.issubdtype(v.dtype, np.floating) and not np.isfinite(v).all():
                    nonfinite.append(f"{name} at n={n} seed={c.seed}")
        if all(all(np.array_equal(arrays[0][k], a[k]) for k in arrays[0]) for a in arrays[1:]):
            constant.append(n)
    out.append(Check("finite", not nonfinite, "all outputs finite" if not nonfinite else f"non-finite reference output: {nonfinite[0]}"))
    big = [n for n in constant if n > 2]
    out.append(Check("depends-on-inputs", not big,
                     "outputs differ between seeds" if not big else
                     f"outputs are identical for every seed at n={big[0]}: the reference does not depend on its inputs"))
    return out
