"""`kernopt task check`: does a task directory define a sound problem?

Checks: it loads; the harness and baseline build; the baseline runs at every check size and at
sizes from the random range; outputs are finite and depend on the inputs (two seeds differ); the
baseline is deterministic across thread/rank counts; the timing size is measurable (0.2-2 s is the
target band; outside it is a warning, below 1 ms an error; cuda-c: from 50 us, below 5 us an error).

Torch family: the reference imports and runs at every check shape and at the ends of the random
ranges; its outputs are finite and depend on the inputs; the baseline solution verifies against it
(without a GPU: under the Triton interpreter, or for cuda only compiled with nvcc); on a GPU the
baseline takes a measurable time at the timing shape.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from kernopt.config import EvalConfig
from kernopt.errors import InfraError
from kernopt.evaluators.base import Binary
from kernopt.evaluators.c_family.compare import compare, load_outputs
from kernopt.evaluators.c_family.evaluator import CFamilyEvaluator
from kernopt.sandbox import Sandbox
from kernopt.sandbox.tree import remove_tree
from kernopt.task import AnyTask, Task, TorchTask

if TYPE_CHECKING:
    from kernopt.evaluators.torch_family.evaluator import TorchEvaluator


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    warning: bool = False


def check_task(task: AnyTask, sandbox: Sandbox, progress: Callable[[str], None] = lambda _: None) -> list[Check]:
    if isinstance(task, TorchTask):
        return _check_torch_task(task, sandbox, progress)
    workroot = Path(tempfile.mkdtemp(prefix="kernopt-check-"))
    if task.uses_gpu:  # cuda-c
        from kernopt.evaluators.c_family.cuda_c import CudaCEvaluator

        ev: CFamilyEvaluator = CudaCEvaluator(task, sandbox, EvalConfig(), workroot)
    else:
        ev = CFamilyEvaluator(task, sandbox, EvalConfig(), workroot)
    try:
        with ev.session():  # docker: one container for the whole check
            if task.uses_gpu and ev.gpu() is None:  # type: ignore[attr-defined]
                return _check_compile_only(task, ev, progress)
            return _check(task, ev, progress)
    finally:
        ev.close()


def _check_compile_only(task: Task, ev: CFamilyEvaluator, progress: Callable[[str], None]) -> list[Check]:
    """cuda-c without a GPU: the harness, driver and baseline build with nvcc; nothing can run."""
    from kernopt.candidate import Candidate

    checks = [Check("load", True, f"{task.target} task, kernel {task.kernel}, functions {', '.join(task.functions)}")]
    progress(f"building harness and baseline with nvcc for {task.build.arch} (no GPU here)")
    r = ev.evaluate(Candidate(files={task.kernel: task.baseline_source()}, author="baseline"))
    if r.status != "unverified":
        checks.append(Check("build", False, f"baseline: {r.status}: {r.reason}"))
        return checks
    kernels = "; ".join(k.describe() for k in r.resources) or "no kernels reported"
    checks.append(Check("build", True, f"baseline builds with nvcc for {task.build.arch} ({kernels})"))
    checks.append(Check("run", True, "skipped: no GPU here, so outputs, determinism and timing are checked only on a GPU machine"))
    return checks


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
                    f1 = next(c for c in run.calls if c.n == n and c.seed == s)
                    f2 = next(c for c in run2.calls if c.n == n and c.seed == s)
                    m, _, _ = compare(load_outputs(d2, f2, run2.layouts[n]), load_outputs(d, f1, run.layouts[n]), task.verify, n)
                    if m:
                        ok, detail = False, f"baseline disagrees with itself at {k}: {m.message}"
        else:
            detail = f"baseline fails at {k} threads/ranks: exit {r2.returncode}"
        checks.append(Check("deterministic", ok, detail))
        remove_tree(d2)
    remove_tree(d)
    progress(f"timing the baseline at n={task.sizes.timing}")
    run, d, r = ev.run_driver(Binary(base, task.timing.threads, task.timing.ranks, None), [task.sizes.timing],
                              [1, 2], True, task.timing.timeout_s, warmup=1, reps=2)
    remove_tree(d)
    if not (r.ok and run.complete):
        checks.append(Check("timing", False, f"baseline at timing size {task.sizes.timing} failed "
                            f"({'timed out' if r.timed_out else f'exit {r.returncode}'})"))
    else:
        checks.append(c_timing_check(task, float(np.median([c.time for c in run.calls if not c.warmup]))))
    return checks


def c_timing_check(task: Task, t: float) -> Check:
    """The verdict on a C-family baseline's time per call at the timing size. CPU kernels: 0.2-2 s is the
    target band (process-to-process noise on a shared machine is milliseconds), below 1 ms an error.
    cuda-c: the driver times the launch plus a device synchronize with the CPU clock, which resolves
    microseconds, so a GPU kernel is measurable from ~5 us and fine from 50 us (a naive GPU baseline
    often takes well under 1 ms)."""
    n = task.sizes.timing
    if task.uses_gpu:
        if t < 5e-6:
            return Check("timing", False, f"baseline takes {t * 1e6:.1f} us at n={n}: too short to time; raise sizes.timing")
        if t < 50e-6:
            return Check("timing", False, f"baseline takes {t * 1e6:.1f} us at n={n}; launch overhead dominates below ~50 us", warning=True)
        return Check("timing", True, f"baseline takes {t * 1e3:.3f} ms per call at n={n}")
    if t < 1e-3:
        return Check("timing", False, f"baseline takes {t * 1e3:.3f} ms at n={n}: too short to time; raise sizes.timing")
    if not 0.2 <= t <= 2.0:
        return Check("timing", False, f"baseline takes {t:.3f} s per call at n={n}; aim for 0.2-2 s", warning=True)
    return Check("timing", True, f"baseline takes {t:.3f} s per call at n={n}")


def _output_checks(task: Task, run: object, d: Path) -> list[Check]:
    from kernopt.evaluators.c_family.compare import DriverRun

    assert isinstance(run, DriverRun)
    out: list[Check] = []
    # verify.outputs and verify.scratch name buffers of the harness's table (outputs and inputs)
    layout = run.layouts[max(run.layouts)]
    outs = {str(b["name"]) for b in layout if b["role"] in (1, 2)}
    ins = {str(b["name"]) for b in layout if b["role"] == 0}
    wrong = [f"verify.outputs.{k} is not an output buffer (outputs: {', '.join(sorted(outs))})" for k in task.verify.outputs if k not in outs]
    wrong += [f"verify.scratch: {k!r} is not an input buffer (inputs: {', '.join(sorted(ins)) or 'none'})"
              for k in task.verify.scratch if k not in ins]
    if wrong:
        out.append(Check("buffers", False, wrong[0]))
    nonfinite, constant = [], []
    for n in sorted(run.layouts):
        calls = [c for c in run.calls if c.n == n]
        arrays = []  # each output's compared part (verify.outputs ranges)
        for c in calls:
            parts = {}
            for name, v in load_outputs(d, c, run.layouts[n]).items():
                parts[name] = v[task.verify.part(name, n, v.size)]
            arrays.append(parts)
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


# ---------------------------------------------------------------- torch family
def _check_torch_task(task: TorchTask, sandbox: Sandbox, progress: Callable[[str], None]) -> list[Check]:
    from kernopt.evaluators.torch_family.evaluator import TorchEvaluator

    ev = TorchEvaluator(task, sandbox, EvalConfig(), Path(tempfile.mkdtemp(prefix="kernopt-check-")))
    try:
        with ev.session():
            return _check_torch(task, ev, progress)
    finally:
        ev.close()


def _check_torch(task: TorchTask, ev: TorchEvaluator, progress: Callable[[str], None]) -> list[Check]:
    from kernopt.evaluators.result import Verification
    from kernopt.evaluators.torch_family.compare import describe_shape, load_arrays
    from kernopt.evaluators.torch_family.evaluator import STARTUP_S, EvalFail

    checks = [Check("load", True, f"{task.target} task, solution {task.kernel}, reference {task.reference}, "
                    f"shapes over {', '.join(task.shapes.vars)}")]
    progress("probing torch in the sandbox")
    try:
        dev = ev.device()
    except InfraError as e:
        return [*checks, Check("torch", False, str(e))]
    checks.append(Check("torch", True, f"runs on {dev.label if dev.cuda or task.target == 'triton' else 'cpu (no GPU: the reference only)'}"))
    shapes = [dict(s) for s in task.shapes.check]
    for end in (0, 1):
        if task.shapes.random:
            s = {**task.shapes.check[0], **{v: r[end] for v, r in task.shapes.random.items()}}
            if s not in shapes:
                shapes.append(s)
    seeds = [11, 12, 13, 14, 15]
    progress(f"running the reference at {len(shapes)} shapes")
    groups = [{"shape": s, "init_seed": 1, "seeds": seeds} for s in shapes]
    timeout = ev.config.verify_timeout_s + STARTUP_S
    run, d, r = ev.run_role("reference", "verify", {"groups": groups}, timeout)
    try:
        if not (r.ok and run.complete):
            last = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
            why = run.error["error"] if run.error else ("timed out" if r.timed_out else last)
            where = f" at {describe_shape(run.error['shape'])}" if run.error and isinstance(run.error.get("shape"), dict) else ""
            return [*checks, Check("reference", False, f"the reference fails{where}: {why}")]
        checks.append(Check("reference", True, f"reference runs at {len(shapes)} shapes x {len(seeds)} seeds"))
        nonfinite, constant = [], []
        for s in shapes:
            calls = [c for c in run.calls if c.shape == s]
            arrays = [load_arrays(d, c.file) for c in calls]
            for c, a in zip(calls, arrays, strict=True):
                if any(np.issubdtype(v.dtype, np.floating) and not np.isfinite(v).all() for v in a.values()):
                    nonfinite.append(f"{describe_shape(s)} seed {c.seed}")
            if all(set(a) == set(arrays[0]) and all(np.array_equal(arrays[0][k], a[k]) for k in a) for a in arrays[1:]):
                constant.append(describe_shape(s))
    finally:
        remove_tree(d)
    checks.append(Check("finite", not nonfinite,
                        "all reference outputs finite" if not nonfinite else f"non-finite reference output at {nonfinite[0]}"))
    # A degenerate shape may have one answer (layer norm over one element); the largest shape may not.
    largest = describe_shape(max(shapes, key=lambda s: float(np.prod(list(s.values()), dtype=np.float64))))
    bad = constant if len(constant) == len(shapes) else [c for c in constant if c == largest]
    checks.append(Check("depends-on-inputs", not bad, "outputs differ between seeds" if not constant else
                        f"outputs differ between seeds (identical only at {', '.join(constant)})" if not bad else
                        f"outputs are identical for every seed at {bad[0]}: the reference does not depend on its inputs"))
    progress("verifying the baseline solution")
    source = task.baseline_source()
    try:
        if task.target == "cuda" and not dev.cuda:
            res = ev.nvcc_resources(source, dev, trusted=True)
            checks.append(Check("baseline", True, f"compiled for {task.build.arch} with nvcc ({len(res)} kernel{'s' * (len(res) != 1)}); "
                                "no GPU here, so not run"))
            return [*checks, Check("timing", True, "no GPU here: the timing shape is not checked", warning=True)]
        ext = ev.build_extension(source) if task.target == "cuda" else None
        ver = Verification()
        ev.verify(source, ver, check_ops=False, ext=ext)
        checks.append(Check("baseline", True, f"baseline verifies at {len(ver.shapes)} shapes x {ver.seeds} seeds on {dev.label}"))
    except EvalFail as f:
        return [*checks, Check("baseline", False, f"baseline solution: {f.status}: {f.reason}")]
    if not dev.cuda:
        checks.append(Check("timing", True, "no GPU here: the timing shape is not checked", warning=True))
        return checks
    progress(f"timing the baseline at {describe_shape(task.shapes.timing) or 'the reference defaults'}")
    job = {"shape": dict(task.shapes.timing), "init_seed": 1, "seeds": list(range(1, 8)), "rotate": 2, "warmup": 2, "reps": 5,
           "flush_l2": True, "flush_bytes": max(256 << 20, 4 * dev.l2_bytes)}
    run, d, r = ev.run_role("baseline", "time", job, task.timing.timeout_s, source=source, ext=ext)
    remove_tree(d)
    if ext is not None:
        remove_tree(ext.parent)
    if not (r.ok and run.complete and run.timed_s()):
        why = run.error["error"] if run.error else ("timed out" if r.timed_out else f"exit {r.returncode}")
        checks.append(Check("timing", False, f"baseline fails at the timing shape: {why}"))
        return checks
    t = float(np.median(run.timed_s()))
    if t < 5e-6:
        checks.append(Check("timing", False, f"baseline takes {t * 1e6:.1f} us at the timing shape: too short to time; raise shapes.timing"))
    elif t < 50e-6:
        checks.append(Check("timing", False, f"baseline takes {t * 1e6:.1f} us at the timing shape; launch overhead dominates below ~50 us",
                            warning=True))
    else:
        checks.append(Check("timing", True, f"baseline takes {t * 1e3:.3f} ms per call at the timing shape on {dev.label}"))
    return checks
