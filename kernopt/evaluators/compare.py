"""Read the trusted driver's result file and compare candidate outputs with reference outputs."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kernopt.task import Verify

_DTYPES: dict[int, np.dtype] = {0: np.dtype(np.float64), 1: np.dtype(np.float32), 2: np.dtype(np.int32),
                               3: np.dtype(np.int64), 4: np.dtype(np.uint8)}
_OUT_ROLES = (1, 2)


@dataclass
class Call:
    """One kernel call as the driver recorded it."""

    n: int
    seed: int
    time: float
    warmup: bool
    mutated: str | None
    file: str


@dataclass
class DriverRun:
    """A parsed result file: output buffer layouts per size, and the calls in order."""

    layouts: dict[int, list[dict[str, object]]] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    complete: bool = False


def read_result(path: Path, nonce: str) -> DriverRun:
    """Parse the driver's line-per-call file. `complete` is True only with the right closing nonce."""
    run = DriverRun()
    if not path.is_file():
        return run
    for line in path.read_text(errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            break
        if "setup" in rec:
            run.layouts[int(rec["setup"])] = list(rec["bufs"])
        elif "done" in rec:
            run.complete = rec["done"] == nonce
        elif "n" in rec:
            run.calls.append(Call(int(rec["n"]), int(rec["seed"]), float(rec["time"]), bool(rec["warmup"]),
                                  rec.get("mutated"), str(rec.get("file", ""))))
    return run


def load_outputs(directory: Path, filename: str, layout: list[dict[str, object]]) -> dict[str, np.ndarray]:
    """Split one output file into named arrays, following the buffer layout of its size."""
    raw = (directory / filename).read_bytes()
    arrays: dict[str, np.ndarray] = {}
    offset = 0
    for buf in layout:
        if buf["role"] not in _OUT_ROLES:
            continue
        dtype = _DTYPES[int(buf["dtype"])]  # type: ignore[call-overload]
        count = int(buf["count"])  # type: ignore[call-overload]
        nbytes = count * dtype.itemsize
        if offset + nbytes > len(raw):
            raise ValueError(f"output file {filename} is truncated")
        arrays[str(buf["name"])] = np.frombuffer(raw, dtype=dtype, count=count, offset=offset)
        offset += nbytes
    return arrays


@dataclass
class Mismatch:
    """Why an output differs from the reference, in words a person (or a critic) can act on."""

    message: str
    max_abs_err: float = float("inf")


def compare(got: dict[str, np.ndarray], want: dict[str, np.ndarray], tol: Verify) -> tuple[Mismatch | None, float, float]:
    """Compare every output buffer. Returns (mismatch or None, max abs error, max relative norm error)."""
    worst_abs = 0.0
    worst_norm = 0.0
    for name, ref in want.items():
        out = got.get(name)
        if out is None or out.shape != ref.shape:
            return Mismatch(f"output {name!r} missing or wrong size"), float("inf"), float("inf")
        if np.issubdtype(ref.dtype, np.floating):
            bad_nan = ~np.isfinite(out) & np.isfinite(ref)
            if bad_nan.any():
                i = int(np.argmax(bad_nan))
                return Mismatch(f"output {name!r}: {int(bad_nan.sum())} of {ref.size} elements not written or not "
                                f"finite (first at index {i}: got {out[i]!r})"), float("inf"), float("inf")
            r64, o64 = ref.astype(np.float64), out.astype(np.float64)
            special = ~np.isfinite(r64)  # inf/NaN in the reference must be matched exactly
            if special.any():
                same = (o64 == r64) | (np.isnan(o64) & np.isnan(r64))
                bad_special = special & ~same
                if bad_special.any():
                    i = int(np.argmax(bad_special))
                    return (Mismatch(f"output {name!r}: element {i} is {out[i]!r} where the reference is {ref[i]!r}"),
                            float("inf"), float("inf"))
                r64, o64 = r64[~special], o64[~special]
            err = np.abs(o64 - r64)
            bound = tol.atol + tol.rtol * np.abs(r64)
            worst_abs = max(worst_abs, float(err.max(initial=0.0)))
            ref_norm = float(np.linalg.norm(r64))
            norm_err = float(np.linalg.norm(o64 - r64)) / ref_norm if ref_norm > 0 else float(np.linalg.norm(o64 - r64))
            worst_norm = max(worst_norm, norm_err)
            bad = err > bound
            if bad.any():
                i = int(np.flatnonzero(~special)[int(np.argmax(bad))]) if special.any() else int(np.argmax(bad))
                return (Mismatch(f"output {name!r}: {int(bad.sum())} of {ref.size} elements outside tolerance "
                                 f"(first at index {i}: got {out[i]:.17g}, expected {ref[i]:.17g}; "
                                 f"max abs err {worst_abs:.3g})", worst_abs), worst_abs, worst_norm)
            # the norm bound has the elementwise atol's floor (||atol|| over the elements): a handful of
            # near-zero outputs (a scalar loss, n=1) is judged by atol, not by pure relative error
            if norm_err > tol.norm_rtol and norm_err * ref_norm > tol.norm_rtol * ref_norm + tol.atol * np.sqrt(r64.size):
                return (Mismatch(f"output {name!r}: relative norm error {norm_err:.3g} exceeds {tol.norm_rtol:.3g}",
                                 worst_abs), worst_abs, worst_norm)
        else:
            bad = out != ref
            if bad.any():
                i = int(np.argmax(bad))
                return (Mismatch(f"output {name!r}: {int(bad.sum())} of {ref.size} elements differ "
                                 f"(first at index {i}: got {out[i]}, expected {ref[i]})"), float("inf"), float("inf"))
    return None, worst_abs, worst_norm
