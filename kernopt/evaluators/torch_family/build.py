"""CUDA candidates of the torch family (target `cuda`): nvcc resource reports and the extension build.

Without a GPU, nvcc is all there is: the CUDA sources a solution hands to load_inline are compiled
for `build.arch` (py_gate.cuda_sources finds them, nvcc.compile_cuda_sources compiles them in the
sandbox); a compile error is the verdict, else the candidate is `unverified`. On a GPU the extension
is built once per evaluation by load_inline in a build step of its own, and its TORCH_EXTENSIONS_DIR
is handed to every later candidate process (the runner loads the built module instead of rebuilding).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from kernopt.errors import InfraError
from kernopt.evaluators.base import EvalFail, new_seed, tail
from kernopt.evaluators.c_family import nvcc
from kernopt.evaluators.result import KernelResources
from kernopt.evaluators.torch_family import py_gate
from kernopt.evaluators.torch_family.host import Device, Host


def nvcc_resources(ev: Host, source: str, dev: Device, trusted: bool = False) -> list[KernelResources]:
    """Compile the CUDA sources with nvcc for their ptxas report. Without a GPU this is the whole
    evaluation (a failure is a compile_error); on a GPU load_inline is the authority, so a failure
    here only means no report. The trusted baseline may have no CUDA at all (an imported eager model)."""
    sources = py_gate.cuda_sources(source)
    if trusted and (isinstance(sources, str) or not sources):
        return []
    if isinstance(sources, str):
        raise EvalFail("rejected", sources)
    d = ev.new_dir("nvcc")
    try:
        outcome = nvcc.compile_cuda_sources(sources, dev.arch if dev.cuda else ev.task.build.arch,
                                            lambda cmd, cwd, timeout: ev.run_step(cmd, cwd, timeout, memory_mb=None), d,
                                            ev.task.build.timeout_s, torch_includes=[f"-I{p}" for p in dev.includes] or None)
    except InfraError:
        if dev.cuda:
            return []
        raise
    finally:
        ev.cleanup(d)
    if not outcome.ok and not dev.cuda:
        if outcome.error.startswith("nvcc not found"):
            raise InfraError(outcome.error)
        raise EvalFail("compile_error", f"CUDA source does not compile: {outcome.error or 'nvcc failed'}", tail(outcome.log))
    return list(outcome.resources) if outcome.ok else []


def build_extension(ev: Host, source: str) -> Path:
    """Build the candidate's CUDA extension (import solution.py, construct ModelNew) in a build step;
    returns a copy of its TORCH_EXTENSIONS_DIR, in a directory no sandboxed run can write."""

    timeout = ev.task.build.timeout_s
    job = {"groups": [{"shape": dict(ev.task.shapes.check[0]), "init_seed": new_seed(), "seeds": []}]}
    run, d, r = ev.run_role("candidate", "build", job, timeout, source=source)
    try:
        if r.timed_out:
            raise EvalFail("compile_error", f"building the CUDA extension timed out after {timeout:.0f}s", tail(r.stderr))
        ev.check_run(run, r, "the extension build", timeout)
        out = ev.new_dir("ext")
        if (d / "ext").is_dir():
            shutil.copytree(d / "ext", out / "ext", symlinks=True)
        else:
            (out / "ext").mkdir()
        return out / "ext"
    finally:
        ev.cleanup(d)
