"""Read the trusted monitor's report and compare candidate outputs with reference outputs.

The monitor (kernopt/evaluators/c_family/c/monitor.c) is the only writer of the report, but the files beside
it lie in a directory the measured program could write, and a malformed report must never raise:
every record is validated strictly, file names are built here from the call index, and every output
file must have the size the layout says and the keyed hash the monitor recorded when it wrote it.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kernopt.task import Verify

_DTYPES: dict[int, np.dtype] = {0: np.dtype(np.float64), 1: np.dtype(np.float32), 2: np.dtype(np.int32),
                               3: np.dtype(np.int64), 4: np.dtype(np.uint8)}
_OUT_ROLES = (1, 2)
_U64 = 2**64
MAX_RECORDS = 200_000


class ReportError(ValueError):
    """The monitor's report, or a file it names, is not what the protocol allows."""


@dataclass
class Call:
    """One kernel call as the monitor measured it."""

    n: int
    seed: int
    time: float
    warmup: bool
    mutated: str | None
    file: str  # "o_<index>.bin", built here from the index; "" when the call's outputs were not kept
    cpu_in: float = 0.0  # CPU seconds of the measured processes inside the call's window
    cpu_out: float = 0.0  # CPU seconds they used since the previous window (fill, finishing the call)
    # CPU seconds everything else on the machine used inside the window (/proc/stat's change less cpu_in, in
    # clock ticks, so one call's figure may be off by a tick either way); None: the monitor could not read it
    others: float | None = 0.0
    nbytes: int = 0
    key: int = 0
    digest: int = 0


@dataclass
class DriverRun:
    """A parsed report: output buffer layouts per size, and the calls in order."""

    layouts: dict[int, list[dict[str, object]]] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    complete: bool = False
    error: str = ""  # the monitor's own account of why the run stopped (or why the report is unusable)


def _int(rec: dict[str, object], key: str, lo: int = 0, hi: int = _U64 - 1) -> int:
    v = rec.get(key)
    if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
        raise ReportError(f"field {key!r} out of range")
    return v


def _float(rec: dict[str, object], key: str, lo: float = 0.0) -> float:
    v = rec.get(key)
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not lo <= v < 1e7:
        raise ReportError(f"field {key!r} out of range")
    return float(v)


def _layout(rec: dict[str, object]) -> list[dict[str, object]]:
    bufs = rec.get("bufs")
    if not isinstance(bufs, list) or not 0 < len(bufs) <= 16:
        raise ReportError("bad buffer table")
    out = []
    for b in bufs:
        if not isinstance(b, dict) or set(b) != {"name", "dtype", "role", "count"}:
            raise ReportError("bad buffer entry")
        name = b["name"]
        if not isinstance(name, str) or not 0 < len(name) < 32:
            raise ReportError("bad buffer name")
        out.append({"name": name, "dtype": _int(b, "dtype", 0, 4), "role": _int(b, "role", 0, 2),
                    "count": _int(b, "count", 0, 1 << 33)})
    return out


def read_report(text: str, nonce: str) -> DriverRun:
    """Parse the monitor's stdout. `complete` only with the closing nonce after a well-formed report;
    anything malformed stops the parse with `error` set (never an exception)."""
    run = DriverRun()
    size: int | None = None
    try:
        for i, line in enumerate(text.splitlines()):
            if i > MAX_RECORDS:
                raise ReportError("too many records")
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except (ValueError, RecursionError):  # JSONDecodeError, and an integer of over 4300 digits
                raise ReportError("a record is not JSON") from None
            if not isinstance(rec, dict):
                raise ReportError("a record is not an object")
            if "setup" in rec:
                size = _int(rec, "setup", 0, 1 << 40)
                run.layouts[size] = _layout(rec)
            elif "call" in rec:
                index = _int(rec, "call", 0, MAX_RECORDS)
                if index != len(run.calls) or size is None or _int(rec, "n", 0, 1 << 40) != size:
                    raise ReportError("calls out of order")
                mutated = rec.get("mutated")
                if mutated is not None and not isinstance(mutated, str):
                    raise ReportError("bad field 'mutated'")
                record = _int(rec, "record", 0, 1) == 1
                run.calls.append(Call(n=size, seed=_int(rec, "seed"), time=_float(rec, "time"), warmup=not record,
                                      mutated=mutated, file=f"o_{index}.bin" if record else "",
                                      cpu_in=_float(rec, "cpu_in"), cpu_out=_float(rec, "cpu_out"),
                                      others=None if rec.get("others") is None else _float(rec, "others", -1e7),
                                      nbytes=_int(rec, "bytes", 0, 1 << 36), key=_int(rec, "key"), digest=_int(rec, "hash")))
            elif "error" in rec:
                run.error = str(rec["error"])[:300]
                break
            elif "done" in rec:
                run.complete = rec["done"] == nonce and not run.error
                break
            elif "exit" not in rec:
                raise ReportError("unknown record")
    except ReportError as e:
        run.error, run.complete = f"malformed monitor report: {e}", False
    return run


def keyed_hash(data: bytes, key: int, word: int) -> tuple[int, int]:
    """The monitor's keyed NH hash of one buffer (zero-padded to whole 64-bit words), its word
    positions starting at `word`. Returns (hash mod 2^64, the next buffer's first word)."""
    padded = data + b"\0" * (-len(data) % 8)
    w = np.frombuffer(padded, dtype="<u8")
    with np.errstate(over="ignore"):
        z = np.uint64(key) + np.arange(word, word + w.size, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
        m = np.uint64(0xFFFFFFFF)
        h = (((w & m) + (z & m)) * ((w >> np.uint64(32)) + (z >> np.uint64(32)))).sum(dtype=np.uint64)
    return int(h), word + w.size


def output_bytes(layout: list[dict[str, object]]) -> int:
    return sum(int(b["count"]) * _DTYPES[int(b["dtype"])].itemsize for b in layout if b["role"] in _OUT_ROLES)  # type: ignore[call-overload]


def load_outputs(directory: Path, call: Call, layout: list[dict[str, object]]) -> dict[str, np.ndarray]:
    """The outputs of one recorded call, split into named arrays by the layout. The file must be a
    regular file of exactly the layout's size whose keyed hash is the one the monitor recorded."""
    want = output_bytes(layout)
    if not call.file or call.nbytes != want:
        raise ReportError(f"call at n={call.n} recorded {call.nbytes} output bytes, the layout has {want}")
    try:
        fd = os.open(directory / call.file, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        raise ReportError(f"output of the call at n={call.n} is missing") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size != want:
            raise ReportError(f"output of the call at n={call.n} is not the file the monitor wrote")
        raw = f.read(want)
    arrays: dict[str, np.ndarray] = {}
    offset, word, digest = 0, 0, 0
    for buf in layout:
        if buf["role"] not in _OUT_ROLES:
            continue
        dtype = _DTYPES[int(buf["dtype"])]  # type: ignore[call-overload]
        count = int(buf["count"])  # type: ignore[call-overload]
        nbytes = count * dtype.itemsize
        chunk = raw[offset:offset + nbytes]
        h, word = keyed_hash(chunk, call.key, word)
        digest = (digest + h) % _U64
        arrays[str(buf["name"])] = np.frombuffer(chunk, dtype=dtype, count=count)
        offset += nbytes
    if digest != call.digest:
        raise ReportError(f"output of the call at n={call.n} changed after the monitor wrote it")
    return arrays


@dataclass
class Mismatch:
    """Why an output differs from the reference, in words a person (or a critic) can act on."""

    message: str
    max_abs_err: float = float("inf")


def _index(part: slice | np.ndarray, i: int) -> int:
    """The index in the whole buffer of element i of its compared part."""
    if isinstance(part, slice):
        return (part.start or 0) + i
    return int(np.flatnonzero(part)[i])


def compare(got: dict[str, np.ndarray], want: dict[str, np.ndarray], tol: Verify,
            n: int | None = None) -> tuple[Mismatch | None, float, float]:
    """Compare every output buffer, each with its tolerances and (given the size n) only the part its
    `verify.outputs` range names. Returns (mismatch or None, max abs error, max relative norm error);
    indices in messages are the buffer's own."""
    worst_abs = 0.0
    worst_norm = 0.0
    for name, full_ref in want.items():
        full_out = got.get(name)
        if full_out is None or full_out.shape != full_ref.shape:
            return Mismatch(f"output {name!r} missing or wrong size"), float("inf"), float("inf")
        part = tol.part(name, n, full_ref.size)
        ref, out = full_ref[part], full_out[part]
        rtol, atol, norm_rtol = tol.tolerances(name)
        if np.issubdtype(ref.dtype, np.floating):
            bad_nan = ~np.isfinite(out) & np.isfinite(ref)
            if bad_nan.any():
                i = int(np.argmax(bad_nan))
                return Mismatch(f"output {name!r}: {int(bad_nan.sum())} of {ref.size} elements not written or not "
                                f"finite (first at index {_index(part, i)}: got {out[i]!r})"), float("inf"), float("inf")
            r64, o64 = ref.astype(np.float64), out.astype(np.float64)
            special = ~np.isfinite(r64)  # inf/NaN in the reference must be matched exactly
            if special.any():
                same = (o64 == r64) | (np.isnan(o64) & np.isnan(r64))
                bad_special = special & ~same
                if bad_special.any():
                    i = int(np.argmax(bad_special))
                    return (Mismatch(f"output {name!r}: element {_index(part, i)} is {out[i]!r} where the reference is {ref[i]!r}"),
                            float("inf"), float("inf"))
                r64, o64 = r64[~special], o64[~special]
            err = np.abs(o64 - r64)
            bound = atol + rtol * np.abs(r64)
            worst_abs = max(worst_abs, float(err.max(initial=0.0)))
            ref_norm = float(np.linalg.norm(r64))
            norm_err = float(np.linalg.norm(o64 - r64)) / ref_norm if ref_norm > 0 else float(np.linalg.norm(o64 - r64))
            worst_norm = max(worst_norm, norm_err)
            bad = err > bound
            if bad.any():
                i = int(np.flatnonzero(~special)[int(np.argmax(bad))]) if special.any() else int(np.argmax(bad))
                return (Mismatch(f"output {name!r}: {int(bad.sum())} of {ref.size} elements outside tolerance "
                                 f"(first at index {_index(part, i)}: got {out[i]:.17g}, expected {ref[i]:.17g}; "
                                 f"max abs err {worst_abs:.3g})", worst_abs), worst_abs, worst_norm)
            # the norm bound has the elementwise atol's floor (||atol|| over the elements): a handful of
            # near-zero outputs (a scalar loss, n=1) is judged by atol, not by pure relative error
            if norm_err > norm_rtol and norm_err * ref_norm > norm_rtol * ref_norm + atol * np.sqrt(r64.size):
                return (Mismatch(f"output {name!r}: relative norm error {norm_err:.3g} exceeds {norm_rtol:.3g}",
                                 worst_abs), worst_abs, worst_norm)
        else:
            bad = out != ref
            if bad.any():
                i = int(np.argmax(bad))
                return (Mismatch(f"output {name!r}: {int(bad.sum())} of {ref.size} elements differ "
                                 f"(first at index {_index(part, i)}: got {out[i]}, expected {ref[i]})"), float("inf"), float("inf"))
    return None, worst_abs, worst_norm
