"""Host side of the torch-family runner's protocol: read its result files, compare outputs, judge ops.

Everything here reads files a sandboxed process wrote, in which candidate code ran: nothing is taken
on trust. A result counts only when closed by the nonce the host passed; outputs are loaded without
pickle; the verdict comes from comparing them with the reference process's outputs.
"""

from __future__ import annotations

import json
import os
import re
import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kernopt.evaluators import stats
from kernopt.evaluators.c_family.compare import compare
from kernopt.task import TorchVerify, Verify

# aten ops that allocate, view or copy memory: a Triton or CUDA candidate needs them around its kernels
# (the Triton interpreter itself runs new_empty, set_ and copy_), so running them is no fallback to the
# reference's computation even when the reference runs them too. record_stream only tells the caching
# allocator that a side stream uses a tensor (a candidate working on a side stream needs it).
GLUE_OPS = frozenset(f"aten.{op}" for op in (
    "empty empty_like empty_strided new_empty new_empty_strided new_zeros new_full zeros zeros_like full full_like "
    "fill_ zero_ set_ copy_ _to_copy _copy_from _copy_from_and_resize resize_ clone contiguous detach alias lift_fresh record_stream "
    "lift_fresh_copy view _unsafe_view view_as reshape _reshape_alias as_strided t transpose permute expand expand_as "
    "unsqueeze squeeze flatten unflatten slice select narrow split split_with_sizes chunk unbind movedim "
    "_local_scalar_dense"
).split())

MAX_OUTPUT_BYTES = 4 << 30  # one output file, uncompressed (a crafted archive cannot exhaust the host's memory)
_NPZ_NAME = re.compile(r"[A-Za-z0-9_]{1,64}\.npz")
_ITEMSIZE = {"torch.float64": 8, "torch.int64": 8, "torch.complex64": 8, "torch.complex128": 16, "torch.float16": 2,
             "torch.bfloat16": 2, "torch.int16": 2, "torch.uint16": 2, "torch.int8": 1, "torch.uint8": 1, "torch.bool": 1,
             "torch.float8_e4m3fn": 1, "torch.float8_e5m2": 1}


@dataclass
class RunnerCall:
    """One recorded call: a verify call, or a checked timed call of a time-mode process."""

    shape: dict[str, int]
    seed: int
    file: str
    outputs: dict[str, Any]
    mutated: str | None = None
    ops: list[str] = field(default_factory=list)
    input_ops: list[str] = field(default_factory=list)


@dataclass
class RunnerRun:
    """A parsed result file. `complete` only with the closing nonce."""

    device: str = ""
    calls: list[RunnerCall] = field(default_factory=list)
    times: list[tuple[float, float, bool]] = field(default_factory=list)  # (device-event or cpu time, wall, warmup)
    timed: dict[int, RunnerCall] = field(default_factory=dict)  # call index -> its saved output
    error: dict[str, Any] | None = None
    complete: bool = False

    def timed_s(self) -> list[float]:
        return [t for t, _, warm in self.times if not warm]

    def walls_s(self) -> list[float]:
        return [w for _, w, warm in self.times if not warm]


def _call(rec: dict[str, Any]) -> RunnerCall:
    return RunnerCall(shape={str(k): int(v) for k, v in dict(rec["shape"]).items()}, seed=int(rec["seed"]), file=str(rec["file"]),
                      outputs=dict(rec["outputs"]), mutated=rec.get("mutated"), ops=[str(o) for o in rec.get("ops", [])],
                      input_ops=[str(o) for o in rec.get("input_ops", [])])


def _regular(path: Path) -> bool:
    """A plain file, not a link: a candidate may have left a link to a file of the host in its directory."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def read_run(path: Path, nonce: str) -> RunnerRun:
    """Parse the runner's JSON lines; a malformed line ends the file (everything after it is ignored)."""
    run = RunnerRun()
    if not _regular(path):
        return run
    for line in path.read_text(errors="replace").splitlines():
        try:
            rec = json.loads(line)
            if not isinstance(rec, dict):
                break
            if "start" in rec:
                run.device = str(rec.get("device", ""))
            elif "done" in rec:
                run.complete = rec["done"] == nonce
            elif "error" in rec:
                run.error = rec
            elif "call" in rec:
                run.calls.append(_call(rec))
            elif "rep" in rec:
                run.times.append((float(rec["time"]), float(rec["wall"]), bool(rec["warmup"])))
            elif "timed" in rec:
                run.timed[int(rec["timed"])] = _call(rec)
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            break
    return run


def load_arrays(directory: Path, name: str) -> dict[str, np.ndarray]:
    """The arrays of one .npz output file the runner named (no pickle, no links, no paths, bounded size)."""
    path = directory / name
    if not _NPZ_NAME.fullmatch(name) or not _regular(path):
        raise ValueError(f"{name!r} is not an output file of this run")
    try:
        with zipfile.ZipFile(path) as zf:
            if sum(info.file_size for info in zf.infolist()) > MAX_OUTPUT_BYTES:
                raise ValueError(f"{name} holds more than {MAX_OUTPUT_BYTES >> 20} MiB")
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (zipfile.BadZipFile, EOFError) as e:
        raise ValueError(f"{name}: {e}") from None


def output_bytes(meta: dict[str, Any]) -> list[int]:
    """Bytes of every tensor in an output structure (what the candidate's process poisons)."""
    if meta.get("t") == "tensor":
        return [int(np.prod(meta["shape"], dtype=np.int64)) * _ITEMSIZE.get(meta["dtype"], 4)]
    return [n for item in meta.get("items", []) for n in output_bytes(item)]


def _describe(meta: dict[str, Any]) -> str:
    t = meta.get("t")
    if t == "tensor":
        return f"a {meta['dtype'].removeprefix('torch.')} tensor of shape {tuple(meta['shape'])} on {meta['device']}"
    if t in ("tuple", "list"):
        return f"a {t} of {len(meta.get('items', []))}"
    if t == "number":
        return f"a Python {meta.get('type')}"
    return "None" if t == "none" else f"a {meta.get('type', 'value')}"


class Comparison:
    """Compares outputs with the reference's, keeping the worst errors seen."""

    def __init__(self, verify: TorchVerify) -> None:
        self.verify = verify
        self.max_abs_err = 0.0
        self.max_rel_norm_err = 0.0

    def mismatch(self, got: dict[str, Any], got_arrays: dict[str, np.ndarray], want: dict[str, Any],
                 want_arrays: dict[str, np.ndarray], path: str = "output") -> str | None:
        """None when `got` matches `want` (structure, dtype, shape, device, values), else one line."""
        kind = want.get("t")
        if got.get("t") != kind or (kind == "number" and got.get("type") != want.get("type")) or kind == "other":
            return f"{path} is {_describe(got)}, the reference's is {_describe(want)}"
        if kind in ("tuple", "list"):
            items, ref_items = got.get("items", []), want.get("items", [])
            if len(items) != len(ref_items):
                return f"{path} is {_describe(got)}, the reference's is {_describe(want)}"
            for i, (g, w) in enumerate(zip(items, ref_items, strict=True)):
                why = self.mismatch(g, got_arrays, w, want_arrays, f"{path}[{i}]")
                if why:
                    return why
            return None
        if kind == "none":
            return None
        if kind == "tensor":
            for attr, label in (("dtype", "dtype"), ("shape", "shape"), ("device", "device")):
                if got.get(attr) != want.get(attr):
                    g, w = got.get(attr), want.get(attr)
                    if attr == "shape":
                        g, w = tuple(g or ()), tuple(w or ())
                    return f"{path} has {label} {g}, the reference's has {w}"
        try:
            out = np.asarray(got_arrays[str(got["key"])]).reshape(-1)
            ref = np.asarray(want_arrays[str(want["key"])]).reshape(-1)
        except (KeyError, ValueError) as e:
            return f"{path}: output data missing ({e})"
        if out.shape != ref.shape or out.dtype != ref.dtype:
            return f"{path}: stored data does not match its description"
        tol = self.verify.tolerance(str(want.get("dtype", "")) if kind == "tensor" else "float64")
        exact = tol is None or not np.issubdtype(ref.dtype, np.floating)
        # The C-family comparison with this dtype's tolerances (whole outputs: no per-output settings here).
        bounds = Verify(atol=0.0, rtol=0.0, norm_rtol=0.0) if tol is None or exact else Verify(
            atol=tol.atol, rtol=tol.rtol, norm_rtol=self.verify.norm_rtol if self.verify.norm_rtol is not None else tol.rtol)
        bad, abs_err, norm_err = compare({path: out}, {path: ref}, bounds)
        self.max_abs_err = max(self.max_abs_err, abs_err)
        self.max_rel_norm_err = max(self.max_rel_norm_err, norm_err)
        return bad.message.replace(f"output {path!r}", path, 1) if bad else None


def fallback_op(candidate_ops: set[str], reference_ops: set[str], allowed: list[str]) -> tuple[str, bool] | None:
    """A torch compute op (not glue, not allowed by the task) the candidate's forward ran, and whether the
    reference runs it too (reported first). The work belongs in the candidate's kernels: computing the
    answer with other torch ops (a + b as stack().sum()) is a fallback just the same."""
    ok = GLUE_OPS | {a if a.startswith("aten.") else f"aten.{a}" for a in allowed}
    hits = sorted(candidate_ops - ok, key=lambda op: (op not in reference_ops, op))
    return (hits[0], hits[0] in reference_ops) if hits else None


def describe_shape(shape: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in shape.items())


def consistent(walls: list[dict[str, tuple[float, float, float, float]]]) -> bool:
    """Do the reported timing savings show on the clocks? Per round and side: (median reported time,
    median in-process wall per call, total in-process wall, the sandbox's wall for the process).

    A candidate whose reported (device-event) time shrinks by more than its wall time per call does,
    or whose in-process walls shrink by more than the sandbox's own clock shows, is reporting times
    that are not real. Slack covers launch overhead (per call) and start-up and JIT noise (per process)."""
    if not walls:
        return True
    call_gap = stats.median([(w["base"][0] - w["cand"][0]) - (w["base"][1] - w["cand"][1]) for w in walls])
    call_slack = 0.25 * stats.median([w["base"][0] for w in walls]) + 100e-6
    proc_gap = stats.median([(w["base"][2] - w["cand"][2]) - (w["base"][3] - w["cand"][3]) for w in walls])
    proc_slack = 0.25 * stats.median([w["base"][2] for w in walls]) + 3.0
    return call_gap <= call_slack and proc_gap <= proc_slack
