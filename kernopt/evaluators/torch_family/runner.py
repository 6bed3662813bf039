"""kernopt's trusted runner for torch-family tasks: `python runner.py JOB.json`, one process per role.

Copied into each sandboxed work directory next to reference.py (and solution.py for the baseline and
candidate roles). Imports only torch, numpy and the standard library, never kernopt. It produces no
verdict: it writes a result file of JSON lines closed by a nonce the host passed, one .npz file of
outputs per recorded call, and the host compares everything with the reference process's files.

Roles: `reference` (Model: truth in verify mode, eager PyTorch in time mode), `compile`
(torch.compile(Model), time mode), `baseline` (the task's solution.py as given), `candidate`.
Modes: `verify` (shapes x seeds; poisoned memory, input immutability and the aten ops seen inside
forward for the candidate), `time` (warm-up, then per call: inputs made anew from the call's seed in
one of `rotate` buffers, L2 flush, device events around the call and a full device synchronize, host
wall clock; the outputs of host-picked timed calls are saved) and `build`
(import and construct only: builds a CUDA extension into TORCH_EXTENSIONS_DIR).

The candidate runs in this very process, so nothing written here is trusted on its own: the job file
is deleted before the candidate is imported, the clocks and synchronize are bound before it can patch
them, and the host cross-checks outputs, the ops seen and the timings.
"""

import importlib.util
import json
import math
import os
import re
import sys
import time
import traceback

import numpy as np
import torch

# Full fp32 in every role (the reference included): TF32 matmuls and convolutions would move fp32 results
# by ~1e-3 on a GPU. Set before any candidate code runs; the static gate refuses torch.backends.
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

# Bound before any candidate code runs: a candidate that patches time.perf_counter, the event methods,
# torch.cuda.synchronize or the C function behind it (torch._C._cuda_synchronize, which
# torch.cuda.synchronize looks up at every call) afterwards does not change what this runner calls.
# The timing stream is taken before the candidate is imported too (Runner.__init__), so a patched
# torch.cuda.current_stream cannot move the events.
_perf = time.perf_counter
_c_cuda_sync = getattr(torch._C, "_cuda_synchronize", None)


def _cuda_sync():
    _c_cuda_sync()  # the whole current device: work on any of its streams is finished


_Event = torch.cuda.Event
_ev_record = torch.cuda.Event.record
_ev_sync = torch.cuda.Event.synchronize
_ev_elapsed = torch.cuda.Event.elapsed_time
_savez = np.savez
_Tensor = torch.Tensor

# Ops a TorchDispatchMode sees; defined lazily (the import is private API and only verify needs it).
_ops_mode_class = None


def _ops_mode():
    global _ops_mode_class
    if _ops_mode_class is None:
        from torch.utils._python_dispatch import TorchDispatchMode

        class _Ops(TorchDispatchMode):
            @classmethod
            def _should_skip_dynamo(cls):
                return False  # else the first op imports torch._dynamo (1.3 s of CPU per process)

            def __init__(self):
                super().__init__()
                self.seen = set()

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                self.seen.add(str(func.overloadpacket))
                return func(*args, **(kwargs or {}))

        _ops_mode_class = _Ops
    return _ops_mode_class()


class EvalFail(Exception):
    def __init__(self, phase, exc, where=None):
        super().__init__(phase)
        self.phase, self.exc, self.where = phase, exc, where or {}


def _build_failure(exc):
    return isinstance(exc, RuntimeError) and "Error building extension" in str(exc)


def _one_line(exc):
    text = f"{type(exc).__name__}: {exc}".strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if _build_failure(exc):  # the compiler's first error, its file named without the build directory
        errs = [ln for ln in lines if re.search(r"\berror\b", ln, re.I) and "Error building extension" not in ln]
        return re.sub(r"(?:/[^\s:/()]+)+/([^\s:/()]+(?::\d+|\(\d+\)))", r"\1", errs[0] if errs else lines[0])[:400]
    return (lines[0] if lines else type(exc).__name__)[:400]


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, os.path.abspath(path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _install_prebuilt_extensions():
    """load_inline reuses an extension the build step compiled (copied into TORCH_EXTENSIONS_DIR):
    torch would otherwise rebuild it, since its build files name the build step's directory."""
    import torch.utils.cpp_extension as ce

    original = ce.load_inline
    suffix = getattr(ce, "LIB_EXT", ".so")

    def load_inline(*args, **kwargs):
        name = kwargs.get("name", args[0] if args else None)
        if isinstance(name, str) and kwargs.get("is_python_module", True) and not kwargs.get("build_directory"):
            build_dir = os.path.join(os.environ.get("TORCH_EXTENSIONS_DIR", ""), name)
            if os.path.isfile(os.path.join(build_dir, name + suffix)):
                return ce._import_module_from_library(name, build_dir, True)
        return original(*args, **kwargs)

    ce.load_inline = load_inline


class Runner:
    def __init__(self, job, nonce):
        self.job, self.nonce = job, nonce
        self.device = torch.device(job["device"])
        self.cuda = self.device.type == "cuda"
        self.role = job["role"]
        self.out = open(job["result"], "w", buffering=1)  # noqa: SIM115 - one line per record, flushed
        self.ref = None
        self.solution = None
        self.stream = torch.cuda.current_stream(self.device) if self.cuda else None

    def emit(self, rec):
        self.out.write(json.dumps(rec) + "\n")
        self.out.flush()

    def sync(self):
        if self.cuda:
            _cuda_sync()  # the whole device: work on any stream is finished

    # ------------------------------------------------------------ set-up
    def load(self):
        try:
            self.ref = _load("reference", self.job["reference"])
        except Exception as e:
            raise EvalFail("reference", e) from None
        if self.role in ("baseline", "candidate"):
            if self.job.get("prebuilt"):
                _install_prebuilt_extensions()
            try:
                self.solution = _load("solution", self.job["source"])
                self.solution.ModelNew  # noqa: B018 - an AttributeError here is the candidate's
            except BaseException as e:  # noqa: BLE001 - SystemExit from the candidate's import is its failure too
                raise EvalFail("import", e) from None

    def set_shape(self, shape):
        for var, value in shape.items():
            setattr(self.ref, var, value)

    def to_device(self, xs):
        return [x.to(self.device) if isinstance(x, _Tensor) else x for x in xs]

    def model(self, init_seed, where):
        try:
            torch.manual_seed(init_seed)
            init = self.to_device(list(self.ref.get_init_inputs()))
            torch.manual_seed(init_seed)
            ref_model = self.ref.Model(*init)
        except Exception as e:
            raise EvalFail("reference", e, where) from None
        if self.role in ("reference", "compile"):
            m = ref_model.to(self.device)
            if self.role == "compile":
                try:
                    m = torch.compile(m)
                except Exception as e:
                    raise EvalFail("compile", e, where) from None
            return m
        try:
            torch.manual_seed(init_seed)
            m = self.solution.ModelNew(*init)
            want, got = ref_model.state_dict(), m.state_dict()
            if list(want) and set(want) == set(got) and all(tuple(want[k].shape) == tuple(got[k].shape) for k in want):
                m.load_state_dict(want)  # KernelBench convention: the same weights as the reference
            return m.to(self.device)
        except BaseException as e:  # noqa: BLE001
            raise EvalFail("init", e, where) from None

    def inputs(self, seed, where, mode=None, on_device=False):
        try:
            torch.manual_seed(seed)
            if mode is not None:
                with mode:
                    xs = list(self.ref.get_inputs())
            elif on_device:  # made where they are used (fast at timing shapes); the same in every role
                with self.device:
                    xs = list(self.ref.get_inputs())
            else:
                xs = list(self.ref.get_inputs())
            return self.to_device(xs)
        except Exception as e:
            raise EvalFail("inputs", e, where) from None

    # ------------------------------------------------------------ outputs
    def save(self, out, filename):
        arrays = {}

        def walk(obj):
            t = type(obj)
            if t is _Tensor or t is torch.nn.Parameter:
                x = obj.detach()
                key = f"a{len(arrays)}"
                host = x.to("cpu")
                if host.dtype in (torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2):
                    host = host.float()
                arrays[key] = host.resolve_conj().resolve_neg().numpy()
                return {"t": "tensor", "dtype": str(x.dtype), "shape": list(x.shape), "device": str(x.device), "key": key}
            if t in (tuple, list):
                return {"t": t.__name__, "items": [walk(v) for v in obj]}
            if t in (bool, int, float):
                key = f"a{len(arrays)}"
                arrays[key] = np.asarray(obj)
                return {"t": "number", "type": t.__name__, "key": key}
            if obj is None:
                return {"t": "none"}
            return {"t": "other", "type": f"{t.__module__}.{t.__qualname__}"}

        meta = walk(out)
        _savez(filename, **arrays)
        return meta

    # ------------------------------------------------------------ poisoning and immutability
    def poison(self, sizes):
        """Fill freed memory with 0xFF bytes (NaN in every float dtype) in the sizes the reference's
        outputs take, so an output the candidate never writes reads as NaN (CUDA caching allocator;
        glibc malloc on the CPU, best effort)."""
        blocks = []
        for nbytes in list(sizes) + ([64 << 20] if self.cuda else []):
            for _ in range(2):
                blocks.append(torch.full((max(int(nbytes), 1),), 255, dtype=torch.uint8, device=self.device))
        self.sync()
        del blocks

    @staticmethod
    def _bits(x):
        return x.detach().contiguous().reshape(-1).view(torch.uint8)

    def mutated(self, before, xs):
        for i, (x, saved) in enumerate(zip(xs, before, strict=False)):
            if saved is None:
                continue
            if not isinstance(x, _Tensor) or x.shape != saved.shape or x.dtype != saved.dtype:
                return f"input {i}"
            if not torch.equal(self._bits(x), self._bits(saved)):
                return f"input {i}"
        return None

    # ------------------------------------------------------------ modes
    def verify(self):
        job = self.job
        cand = self.role == "candidate"
        record = bool(job.get("record_ops"))
        n = 0
        for group in job["groups"]:
            shape = group["shape"]
            self.set_shape(shape)
            model = self.model(group["init_seed"], {"shape": shape})
            for seed in group["seeds"]:
                where = {"shape": shape, "seed": seed}
                gen = _ops_mode() if record else None
                xs = self.inputs(seed, where, gen)
                before = [x.clone() if isinstance(x, _Tensor) else None for x in xs] if cand else []
                if cand and job.get("poison"):
                    self.poison(group.get("poison_bytes", []))
                mode = _ops_mode() if record else None
                try:
                    with torch.no_grad():
                        if mode is not None:
                            with mode:
                                out = model(*xs)
                        else:
                            out = model(*xs)
                    self.sync()
                except BaseException as e:  # noqa: BLE001
                    raise EvalFail("call", e, where) from None
                rec = {"call": n, "shape": shape, "seed": seed, "file": f"out{n}.npz"}
                rec["mutated"] = self.mutated(before, xs) if cand else None
                rec["outputs"] = self.save(out, rec["file"])
                if mode is not None:
                    rec["ops"] = sorted(mode.seen)
                    rec["input_ops"] = sorted(gen.seen)
                self.emit(rec)
                n += 1
                del out, xs, before

    def time(self):
        """One seed per call: before every call, outside the timed region, the input set it uses (one of
        `rotate`, so consecutive calls touch different buffers) is made anew from that call's seed on the
        device. No call sees inputs an earlier call saw, so a cache of results (by pointer, shape or
        content) cannot replay an answer. The outputs of the calls the host picked (`check`: the last
        one and some it drew at random, unknown to the candidate) are saved for the host to check, so
        skipping the work on calls that would go unchecked does not pay."""
        job = self.job
        shape, seeds = job["shape"], job["seeds"]
        self.set_shape(shape)
        model = self.model(job["init_seed"], {"shape": shape})
        sets = [None] * max(1, int(job.get("rotate", 1)))
        flush = None
        if self.cuda and job.get("flush_l2"):
            flush = torch.empty(int(job.get("flush_bytes", 256 << 20)), dtype=torch.uint8, device=self.device)
        out = None
        check = {int(i) for i in job.get("check", [])} | {len(seeds) - 1}
        for i, seed in enumerate(seeds):
            where = {"shape": shape, "seed": seed}
            k = i % len(sets)
            sets[k] = None
            sets[k] = xs = self.inputs(seed, where, on_device=True)
            out = None
            try:
                with torch.no_grad():
                    if self.cuda:
                        if flush is not None:
                            flush.zero_()
                        _cuda_sync()
                        start, end = _Event(enable_timing=True), _Event(enable_timing=True)
                        _ev_record(start, self.stream)
                        w0 = _perf()
                        out = model(*xs)
                        _cuda_sync()  # every stream, so side streams cannot hide work
                        _ev_record(end, self.stream)
                        _ev_sync(end)
                        w1 = _perf()
                        t = _ev_elapsed(start, end) / 1000.0
                    else:
                        w0 = _perf()
                        out = model(*xs)
                        w1 = _perf()
                        t = w1 - w0
            except BaseException as e:  # noqa: BLE001
                raise EvalFail("call", e, where) from None
            if not (isinstance(t, float) and math.isfinite(t)):
                t = float("nan")
            self.emit({"rep": i, "warmup": i < job["warmup"], "time": t, "wall": w1 - w0})
            if i in check:  # saved outside the timed region
                name = f"timed{i}.npz"
                self.emit({"timed": i, "shape": shape, "seed": seed, "file": name, "outputs": self.save(out, name)})

    def build(self):
        group = self.job["groups"][0]
        self.set_shape(group["shape"])
        self.model(group["init_seed"], {"shape": group["shape"]})

    def run(self):
        name = torch.cuda.get_device_name(self.device) if self.cuda else "cpu"
        self.emit({"start": self.role, "mode": self.job["mode"], "device": name})
        self.load()
        getattr(self, self.job["mode"])()
        self.sync()
        self.emit({"done": self.nonce})


def main(argv):
    if len(argv) != 2:
        print("usage: runner.py JOB.json", file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        job = json.load(f)
    os.unlink(argv[1])  # the candidate cannot read the nonce (or the seeds) from a file
    nonce = job.pop("nonce")
    runner = Runner(job, nonce)
    try:
        runner.run()
    except EvalFail as f:
        runner.emit({"error": _one_line(f.exc), "phase": f.phase, "build": _build_failure(f.exc), **f.where,
                     "trace": "".join(traceback.format_exception(f.exc))[-3000:]})
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
