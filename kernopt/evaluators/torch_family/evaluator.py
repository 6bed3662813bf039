"""The torch-family evaluator (targets triton and cuda): static gate, build, verify, time.

Every process runs in the sandbox, one per role (kernopt/evaluators/torch_family/runner.py): the reference
(Model: truth), the candidate (its ModelNew, knobs applied), the baseline (the task's solution.py as
given, trusted: never gated or fallback-checked) and, when timing on a GPU, eager and torch.compile
versions of the reference. This module decides what to run and judges the files the runner wrote.

Without a GPU: a triton candidate is verified under the Triton interpreter on CPU tensors (status ok,
flag no_gpu_timing, no timing); a cuda candidate is only compiled with nvcc (status unverified, its
kernels' resources recorded). A CPU or interpreter timing is never reported as a speedup.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any

from kernopt import placement
from kernopt.candidate import Candidate
from kernopt.config import EvalConfig
from kernopt.errors import InfraError
from kernopt.evaluators.base import EvalFail, SandboxedEvaluator, describe_exit, new_seed, program_messages, tail
from kernopt.evaluators.c_family import nvcc
from kernopt.evaluators.knobs import KnobError, apply_knobs
from kernopt.evaluators.result import EvalResult, KernelResources, TimingStats, Verification, VerifiedBest
from kernopt.evaluators.torch_family import py_gate
from kernopt.evaluators.torch_family.compare import Comparison, RunnerRun, describe_shape, fallback_op, load_arrays, output_bytes, read_run
from kernopt.evaluators.torch_family.host import Device
from kernopt.sandbox import ExecResult, Sandbox
from kernopt.sandbox.tree import remove_tree
from kernopt.task import TorchTask

PYTHON_ENV = "KERNOPT_TORCH_PYTHON"  # host setting: the Python (with torch, triton) the local sandbox runs
STARTUP_S = 60.0  # added to config.verify_timeout_s: Python, torch and triton imports, a CUDA context, JIT compiles
PROBE = """
import json, sys
try:
    import torch
except Exception as e:
    print(json.dumps({"error": f"{type(e).__name__}: {e}"})); sys.exit(0)
info = {"torch": torch.__version__, "cuda": torch.cuda.is_available()}
try:
    import triton
    info["triton"] = triton.__version__
except Exception:
    info["triton"] = None
if info["cuda"]:
    p = torch.cuda.get_device_properties(0)
    info.update(name=p.name, cap=[p.major, p.minor], l2=int(getattr(p, "L2_cache_size", 0)))
try:
    import sysconfig
    from torch.utils.cpp_extension import include_paths
    info["includes"] = [*include_paths(), sysconfig.get_paths()["include"]]
except Exception:
    info["includes"] = []
print(json.dumps(info))
"""




def runner_source() -> Path:
    return Path(str(resources.files("kernopt.evaluators.torch_family") / "runner.py"))


_PHASE = {"import": "importing solution.py", "init": "ModelNew(...)", "call": "ModelNew.forward", "inputs": "get_inputs()",
          "reference": "the reference", "compile": "torch.compile"}


class TorchEvaluator(SandboxedEvaluator):
    """Verifies (and on a GPU times) torch-family candidates of one task in one sandbox."""

    start_hint = f" (set {PYTHON_ENV} to a Python with torch and triton that the sandbox user can run)"

    def __init__(self, task: TorchTask, sandbox: Sandbox, config: EvalConfig, workroot: Path) -> None:
        self.task, self.sandbox, self.config, self.workroot = task, sandbox, config, workroot
        # The local sandbox runs this machine's Python (as root: under a private uid, which must be able to
        # reach it); a container runs its image's python3.
        self.python = (os.environ.get(PYTHON_ENV) or sys.executable) if sandbox.name == "local" else "python3"
        self.workroot.mkdir(parents=True, exist_ok=True)
        os.chmod(self.workroot, 0o755)
        self._device: Device | None = None
        self._baseline_ext: Path | None = None
        self._sb: Sandbox = sandbox

    def tool_dirs(self) -> list[str]:
        # load_inline runs `ninja`, which pip installs beside the Python that has torch (a venv's bin).
        return [os.path.dirname(self.python)] if self.sandbox.name == "local" and os.path.isabs(self.python) else []

    # ---------------------------------------------------------------- processes
    def device(self) -> Device:
        """Probe the sandbox once: is torch there, and is there a GPU?"""
        if self._device is None:
            d = self.new_dir("probe")
            try:
                r = self.run_step([self.python, "-c", PROBE], d, 120.0, memory_mb=None)
                try:
                    info = json.loads(r.stdout.strip().splitlines()[-1])
                except (json.JSONDecodeError, IndexError):
                    raise InfraError(f"probing torch in the sandbox failed ({describe_exit(r)}): {tail(r.stderr, 3)}") from None
            finally:
                remove_tree(d)
            if "error" in info:
                raise InfraError(f"torch is not importable by the sandbox's Python ({self.python}): {info['error']}; "
                                 f"install it there or set {PYTHON_ENV}")
            if self.task.target == "triton" and not info.get("triton"):
                raise InfraError(f"triton is not importable by the sandbox's Python ({self.python})")
            includes = tuple(str(p) for p in info.get("includes", []))
            if info.get("cuda"):
                major, minor = info.get("cap", [0, 0])
                self._device = Device(True, str(info.get("name", "GPU")), f"sm_{major}{minor}", int(info.get("l2", 0)), includes)
            else:
                self._device = Device(False, "cpu", includes=includes)
        return self._device

    def run_role(self, role: str, mode: str, job: dict[str, Any], timeout: float, source: str | None = None,
                 ext: Path | None = None, carry: dict[str, Path] | None = None) -> tuple[RunnerRun, Path, ExecResult]:
        """Run the trusted runner once, in a fresh directory; returns the parsed result, the directory, the exec result.
        `ext`: a built TORCH_EXTENSIONS_DIR to reuse; `carry`: caches of an earlier process of the same role."""
        dev = self.device()
        d = self.new_dir(f"{role}-{mode}")
        shutil.copy(runner_source(), d / "runner.py")
        shutil.copy(self.task.root / self.task.reference, d / "reference.py")
        if source is not None:
            (d / "solution.py").write_text(source)
        if ext is not None:
            shutil.copytree(ext, d / "ext", symlinks=True)  # symlinks=True: a link the candidate left is copied as a link, never followed
        for name, src in (carry or {}).items():
            if src.is_dir():
                shutil.copytree(src, d / name, symlinks=True)
        nonce = secrets.token_hex(16)
        full = {"role": role, "mode": mode, "device": "cuda" if dev.cuda else "cpu", "reference": "reference.py",
                "source": "solution.py", "result": "result.jsonl", "prebuilt": ext is not None, **job, "nonce": nonce}
        (d / "job.json").write_text(json.dumps(full))
        env = {"HOME": str(d), "USER": "kernopt", "LOGNAME": "kernopt", "TRITON_CACHE_DIR": str(d / ".triton"),
               "TORCH_EXTENSIONS_DIR": str(d / "ext"), "TORCHINDUCTOR_CACHE_DIR": str(d / ".inductor"),
               "TORCHINDUCTOR_COMPILE_THREADS": "1"}  # no pool of compile workers under the sandbox's process limit
        if not dev.cuda:
            env["TRITON_INTERPRET"] = "1"
        for var in ("CUDA_VISIBLE_DEVICES", *(("CUDA_HOME",) if self.sandbox.name == "local" else ())):
            if var in os.environ:
                env[var] = os.environ[var]
        try:
            r = self.run_step([self.python, "-I", "-B", "runner.py", "job.json"], d, timeout, env, memory_mb=None if dev.cuda else -1)
        finally:
            os.chmod(d, 0o700)  # its files stay out of reach of every later sandboxed run
        return read_run(d / "result.jsonl", nonce), d, r

    def check_run(self, run: RunnerRun, r: ExecResult, where: str, timeout: float, status_on_error: str = "runtime_error") -> None:
        """A candidate process that did not finish cleanly is a verdict."""
        if r.timed_out:
            raise EvalFail("timeout", f"timed out after {timeout:.0f}s at {where}", program_messages(r.stderr))
        err = run.error
        if err is not None:
            shape = f" [{describe_shape(err['shape'])}, seed {err.get('seed', '-')}]" if isinstance(err.get("shape"), dict) else ""
            phase = str(err.get("phase", ""))
            msg = str(err.get("error", ""))[:400]
            log = str(err.get("trace", ""))[-3000:] + "\n" + program_messages(r.stderr)
            if err.get("build") is True:
                raise EvalFail("compile_error", f"the extension does not build: {msg}", log)
            raise EvalFail(status_on_error, f"{_PHASE.get(phase, phase)} raised {msg}{shape} at {where}", log)
        if not r.ok or not run.complete:
            why = describe_exit(r) if not r.ok else "exited before the runner finished"
            raise EvalFail(status_on_error, f"{why} at {where} after {len(run.calls)} calls", program_messages(r.stderr + r.stdout))

    def cleanup(self, *dirs: Path | None) -> None:
        """Remove these run directories (unless the config keeps work directories)."""
        if not self.config.keep_workdirs:
            for d in dirs:
                if d is not None:
                    remove_tree(d)

    # ---------------------------------------------------------------- evaluate
    def evaluate(self, candidate: Candidate, best: VerifiedBest | None = None) -> EvalResult:
        """Static gate, build, correctness sweep, interleaved GPU timing. Never raises for candidate faults.
        `best` (the search's verified best) is what plausibility is judged against; this family does not yet
        time a candidate against the best (no vs_best: the search falls back to comparing speedups)."""
        with self.session():
            return self._evaluate(candidate, best)

    def prepare(self, candidate: Candidate) -> tuple[str, bool]:
        """The source to run (knobs applied) and whether it is the trusted baseline. Raises EvalFail."""
        source = candidate.files.get(self.task.kernel)
        if source is None:
            raise EvalFail("rejected", f"candidate has no {self.task.kernel}")
        _syntax(self.task.kernel, source)
        try:
            source = apply_knobs(source, candidate.defines)
        except KnobError as e:
            raise EvalFail("rejected", str(e)) from None
        _syntax(self.task.kernel, source)
        trusted = source == self.task.baseline_source()
        if not trusted:
            # Imported, never looked up: a gate that cannot load is an error, not an open door.
            why = py_gate.check_python_source(self.task, source)
            if why:
                raise EvalFail("rejected", why)
        return source, trusted

    def _evaluate(self, candidate: Candidate, best: VerifiedBest | None = None) -> EvalResult:
        phases: dict[str, float] = {}
        ver = Verification()
        resources_: list[KernelResources] = []
        t = time.monotonic()
        ext: Path | None = None
        try:
            with placement.hold("shared", phases, f"building and checking {self.task.name} {candidate.id}", self.on_phase):
                # building and checking run beside other evaluations
                t = time.monotonic()
                self.phase("building")
                source, trusted = self.prepare(candidate)
                dev = self.device()
                ver.device = dev.label if self.task.target == "triton" or dev.cuda else "none (compiled only)"
                if self.task.target == "cuda":
                    resources_ = self.nvcc_resources(source, dev, trusted)
                    if not dev.cuda:
                        phases["build"] = time.monotonic() - t
                        summary = nvcc.describe_resources(resources_) if resources_ else "no kernels reported"
                        return EvalResult(candidate_id=candidate.id, status="unverified", verification=ver, phase_s=phases, resources=resources_,
                                          reason=f"compiled for {self.task.build.arch} with nvcc ({summary}); no GPU here, so not run or timed")
                    ext = self.build_extension(source)
                    self.baseline_extension()  # built here, beside other evaluations, not in the exclusive timing phase
                phases["build"] = time.monotonic() - t
                t = time.monotonic()
                self.phase("verifying")
                self.verify(source, ver, check_ops=not trusted, ext=ext)
                phases["verify"] = time.monotonic() - t
                if not dev.cuda:
                    return EvalResult(candidate_id=candidate.id, status="ok", verification=ver, phase_s=phases, flags=["no_gpu_timing"],
                                      reason=f"verified with the Triton interpreter at {len(ver.shapes)} shapes x {ver.seeds} seeds; "
                                             "no GPU here, so no timing")
            with placement.hold("exclusive", phases, f"timing {self.task.name} {candidate.id}", self.on_phase):
                # timing has the machine to itself (kernopt/placement.py)
                t = time.monotonic()
                self.phase("timing")
                timing = self.time(source, self.task.timing.rounds if self.config.rounds is None else self.config.rounds, ext=ext)
                ver.timed_outputs_checked = True
                phases["time"] = time.monotonic() - t
            return EvalResult(candidate_id=candidate.id, status="ok", reason=f"verified; {timing.describe()}", verification=ver,
                              timing=timing, flags=self.timing_flags(timing, best), phase_s=phases, resources=resources_)
        except EvalFail as f:
            phases["last"] = time.monotonic() - t
            return EvalResult(candidate_id=candidate.id, status=f.status, reason=f.reason, log=f.log,  # type: ignore[arg-type]
                              verification=ver, phase_s=phases, resources=resources_)
        finally:
            self.cleanup(ext.parent if ext is not None else None)

    # ---------------------------------------------------------------- cuda (kernopt/evaluators/torch_build.py)
    def nvcc_resources(self, source: str, dev: Device, trusted: bool = False) -> list[KernelResources]:
        from kernopt.evaluators.torch_family.build import nvcc_resources

        return nvcc_resources(self, source, dev, trusted)

    def build_extension(self, source: str) -> Path:
        from kernopt.evaluators.torch_family.build import build_extension

        return build_extension(self, source)

    def baseline_extension(self) -> Path | None:
        """The task's own solution.py built once per evaluator (cuda on a GPU; None otherwise): every timing
        process of the baseline loads it instead of compiling it again (tens of seconds a process)."""
        if self.task.target != "cuda" or not self.device().cuda:
            return None
        if self._baseline_ext is None:
            try:
                self._baseline_ext = self.build_extension(self.task.baseline_source())
            except EvalFail as f:
                raise InfraError(f"the task's {self.task.kernel} does not build: {f.reason}") from None
        return self._baseline_ext

    # ---------------------------------------------------------------- verify
    def verify(self, source: str, ver: Verification, check_ops: bool = True, ext: Path | None = None) -> None:
        """Reference and candidate at the check shapes plus drawn ones x seeds; raises EvalFail."""
        task = self.task
        shapes: list[dict[str, int]] = []
        for s in [*task.shapes.check, *task.shapes.draw(secrets.SystemRandom())]:
            if dict(s) not in shapes:
                shapes.append(dict(s))
        groups = [{"shape": s, "init_seed": new_seed(), "seeds": [new_seed() for _ in range(task.verify.seeds)]} for s in shapes]
        ver.shapes, ver.seeds = shapes, task.verify.seeds
        timeout = self.config.verify_timeout_s + STARTUP_S
        ref, ref_dir, r = self.run_role("reference", "verify", {"groups": groups, "record_ops": True}, timeout)
        cand_dir: Path | None = None
        try:
            if not (r.ok and ref.complete):
                why = ref.error["error"] if ref.error else f"{describe_exit(r)}: {tail(r.stderr, 3)}"
                raise InfraError(f"the reference failed during verification: {why}")
            want = {(describe_shape(c.shape), c.seed): c for c in ref.calls}
            for g in groups:
                first = next(c for c in ref.calls if c.shape == g["shape"])
                g["poison_bytes"] = output_bytes(first.outputs)
            job = {"groups": groups, "record_ops": check_ops, "poison": True}
            run, cand_dir, r = self.run_role("candidate", "verify", job, timeout, source=source, ext=ext)
            self.check_run(run, r, "verification", timeout)
            for call in run.calls:
                if call.mutated and not task.verify.allow_input_mutation:
                    raise EvalFail("rejected", f"ModelNew.forward modified its {call.mutated} [{describe_shape(call.shape)}, seed {call.seed}]")
            cmp = Comparison(task.verify)
            try:
                for call in run.calls:
                    ref_call = want.get((describe_shape(call.shape), call.seed))
                    if ref_call is None:
                        continue
                    why = cmp.mismatch(call.outputs, load_arrays(cand_dir, call.file), ref_call.outputs, load_arrays(ref_dir, ref_call.file))
                    if why:
                        raise EvalFail("wrong_answer", f"{why} [{describe_shape(call.shape)}, seed {call.seed}]")
            finally:
                ver.max_abs_err, ver.max_rel_norm_err = cmp.max_abs_err, cmp.max_rel_norm_err
            missing = set(want) - {(describe_shape(c.shape), c.seed) for c in run.calls}
            if missing:
                raise EvalFail("runtime_error", f"no output recorded for {sorted(missing)[0][0]}")
            if check_ops:
                self._check_ops(ref, run)
        except (OSError, ValueError, KeyError) as e:
            raise EvalFail("runtime_error", f"an output file is unreadable ({type(e).__name__}: {e})") from None
        finally:
            self.cleanup(ref_dir, cand_dir)

    def _check_ops(self, ref: RunnerRun, run: RunnerRun) -> None:
        ref_ops = {op for c in ref.calls for op in c.ops}
        cand_ops = {op for c in run.calls for op in c.ops}
        hit = fallback_op(cand_ops, ref_ops, self.task.verify.allow_torch_ops)
        if hit:
            op, theirs = hit
            if theirs:
                raise EvalFail("rejected", f"ModelNew.forward falls back to the reference's torch op {op}")
            raise EvalFail("rejected", f"ModelNew.forward computes with the torch op {op} instead of its own kernels "
                                    "(only allocation, view and copy glue may run in torch; the task's verify.allow_torch_ops lists exceptions)")
        ref_inputs = {(describe_shape(c.shape), c.seed): set(c.input_ops) for c in ref.calls}
        for c in run.calls:
            extra = sorted(set(c.input_ops) - ref_inputs.get((describe_shape(c.shape), c.seed), set()))
            if extra:
                raise EvalFail("rejected", f"get_inputs() ran {extra[0]} in the candidate's process only: the candidate intercepts input generation")

    # ---------------------------------------------------------------- time
    def time(self, source: str, rounds: int, ext: Path | None = None) -> TimingStats:
        """Interleave baseline and candidate processes (and eager / torch.compile references); the candidate's
        timed outputs are checked against the reference's. On a CPU this only exercises the plumbing."""
        from kernopt.evaluators.torch_family.timing import time_rounds

        return time_rounds(self, source, rounds, ext)

    # ---------------------------------------------------------------- remeasure / close
    def remeasure(self, candidate: Candidate) -> EvalResult:
        """Re-time a verified candidate in fresh processes (and a fresh extension build), with more rounds."""
        with self.session():
            t = time.monotonic()
            ext: Path | None = None
            try:
                source, _ = self.prepare(candidate)
                dev = self.device()
                if not dev.cuda:
                    status = "unverified" if self.task.target == "cuda" else "ok"
                    return EvalResult(candidate_id=candidate.id, status=status, flags=["no_gpu_timing"],  # type: ignore[arg-type]
                                      reason="re-measurement: no GPU here, so no timing")
                if self.task.target == "cuda":
                    ext = self.build_extension(source)
                    self.baseline_extension()
                with placement.hold("exclusive", what=f"re-measuring {self.task.name} {candidate.id}", on_wait=self.on_phase):
                    self.phase("re-measuring")
                    timing = self.time(source, self.config.remeasure_rounds, ext=ext)
            except EvalFail as f:
                return EvalResult(candidate_id=candidate.id, status=f.status, reason=f"re-measurement: {f.reason}", log=f.log)  # type: ignore[arg-type]
            finally:
                self.cleanup(ext.parent if ext is not None else None)
            return EvalResult(candidate_id=candidate.id, status="ok", timing=timing, phase_s={"time": time.monotonic() - t},
                              reason=f"re-measured; {timing.describe()}", flags=self.timing_flags(timing),
                              verification=Verification(timed_outputs_checked=True, device=dev.label))

    def close(self) -> None:
        if not self.config.keep_workdirs:
            remove_tree(self.workroot)


def _syntax(name: str, source: str) -> None:
    try:
        compile(source, name, "exec", dont_inherit=True)
    except SyntaxError as e:
        raise EvalFail("compile_error", f"{name} does not compile: line {e.lineno}: {e.msg}") from None
    except ValueError as e:  # null bytes
        raise EvalFail("compile_error", f"{name} does not compile: {e}") from None
