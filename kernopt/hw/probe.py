"""`kernopt hw probe`: measure the machine's roofs inside the sandbox candidates run in, once per host.

The probe (probe.c, package data) is compiled in the sandbox with gcc -O3 -march=native -fopenmp and
run there under the exclusive host lock (kernopt/placement.py), so it neither disturbs nor is
disturbed by another kernopt timing. It reports the STREAM-triad bandwidth and the FP64 FMA peak at
thread counts 1, 2, 4, ... and the sandbox's core count. The profile is cached as JSON per host
fingerprint under $KERNOPT_HW_CACHE, else $XDG_CACHE_HOME/kernopt/hw/, else ~/.cache/kernopt/hw/.

`cached_profile(sandbox)` only reads the cache (cheap: evaluators call it); `probe(sandbox)` measures
when nothing is cached (or when asked to refresh) and writes the cache.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kernopt import placement
from kernopt.errors import InfraError, ToolMissing
from kernopt.hw import cpu_model
from kernopt.sandbox import Limits, Sandbox

PROBE_VERSION = 1  # bump when probe.c or its settings change: older cache files are then ignored
REPS = 10  # timed triad passes per thread count (after one untimed); the best counts
FLOOR_MB = 64  # smallest array, whatever the cache says
CAP_MB = 1024  # largest array (3 of them are allocated)
WALL_S = 180.0


class HostFingerprint(BaseModel):
    """What a profile is valid for: a change in any of these means measuring again."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cpu_model: str
    cores: int = Field(description="Cores the sandbox's commands can use.")
    memory_mb: int
    kernel: str
    sandbox: str = Field(description="local | docker")
    compiler: str = Field(description="local: the host's gcc version; docker: the sandbox image (its gcc is the image's).")

    @property
    def key(self) -> str:
        digest = hashlib.sha256(json.dumps([PROBE_VERSION, self.model_dump()], sort_keys=True).encode()).hexdigest()
        return f"{self.sandbox}-{digest[:16]}"


class HardwareProfile(BaseModel):
    """The measured roofs of one host as seen from one sandbox kind."""

    model_config = ConfigDict(extra="forbid")

    version: int = PROBE_VERSION
    fingerprint: HostFingerprint
    bandwidth_gbps: dict[int, float] = Field(description="Threads -> best STREAM-triad GB/s (3 x 8 bytes per element: "
                                             "write-allocate traffic is not counted).")
    peak_gflops: dict[int, float] = Field(description="Threads -> best FP64 FMA GFLOP/s (-O3 -march=native).")
    llc_bytes: int = Field(description="Total last-level cache the probe found in sysfs (0: none found, the floor was used).")
    array_bytes: int = Field(description="Bytes per triad array (4x the LLC, at least the floor, at most the cap).")
    reps: int = Field(description="Timed triad passes per thread count (the best is kept).")
    vector_bits: int = Field(description="Vector width the FMA loop was compiled for.")
    probe_compiler: str = Field("", description="The gcc version that compiled the probe, as it reported itself.")
    measured_at: str = Field(description="When (UTC, ISO 8601).")
    probe_s: float = Field(description="Wall seconds the measurement took (compile and run; waiting for the host lock not counted).")

    @property
    def threads(self) -> list[int]:
        return sorted(self.bandwidth_gbps)

    @staticmethod
    def _at(table: dict[int, float], threads: int) -> float:
        """The value at `threads`: measured, or linear between the measured neighbours, or the nearest end."""
        points = sorted(table.items())
        if threads <= points[0][0]:
            return points[0][1]
        for (t0, v0), (t1, v1) in zip(points, points[1:], strict=False):
            if threads <= t1:
                return v0 + (v1 - v0) * (threads - t0) / (t1 - t0)
        return points[-1][1]  # more threads than cores: no more bandwidth or flops than all of them

    def bandwidth_at(self, threads: int) -> float:
        return self._at(self.bandwidth_gbps, threads)

    def peak_at(self, threads: int) -> float:
        return self._at(self.peak_gflops, threads)

    @property
    def peak_1(self) -> float:
        return self.peak_at(1)

    @property
    def peak_all(self) -> float:
        return self.peak_gflops[max(self.peak_gflops)]

    @property
    def bandwidth_all(self) -> float:
        return self.bandwidth_gbps[max(self.bandwidth_gbps)]

    @property
    def balance(self) -> float:
        """Machine balance, flop per byte: the arithmetic intensity where the two roofs meet (all cores)."""
        return self.peak_all / self.bandwidth_all

    def busy_signs(self) -> str:
        """Why this profile looks measured while something else used the machine ('' when it does not):
        more threads gave less bandwidth, or the FMA peak (which scales with cores) did not scale."""
        counts = sorted(self.bandwidth_gbps)
        if any(self.bandwidth_gbps[b] < 0.9 * self.bandwidth_gbps[a] for a, b in zip(counts, counts[1:], strict=False)):
            return "more threads gave less bandwidth"
        top = max(self.peak_gflops)
        if top > 1 and self.peak_1 > 0 and self.peak_all < 0.75 * top * self.peak_1:
            return f"{top} threads reached only {self.peak_all / self.peak_1:.1f}x one thread's FLOP/s"
        return ""


# ------------------------------------------------------------------------------------------ cache
def cache_dir() -> Path:
    explicit = os.environ.get("KERNOPT_HW_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kernopt" / "hw"


def cache_path(fp: HostFingerprint) -> Path:
    return cache_dir() / f"{fp.key}.json"


def _host_memory_mb() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _gcc_version() -> str:
    gcc = shutil.which("gcc")
    if gcc is None:
        return "gcc: not found"
    try:
        r = subprocess.run([gcc, "-dumpfullversion", "-dumpversion"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "gcc: unknown"
    return f"gcc {r.stdout.strip() or 'unknown'}"


def fingerprint(sandbox: Sandbox) -> HostFingerprint:
    """This host as the sandbox sees it. A docker engine reports its own machine (it may be remote); the
    CPU model is this host's only when the engine is on this host (a unix socket)."""
    client = getattr(sandbox, "client", None)
    if sandbox.name == "docker" and client is not None:
        try:
            info = client.info()
        except Exception:  # noqa: BLE001 - an engine that does not answer: no profile matches, none is lost
            info = {}
        remote = os.environ.get("DOCKER_HOST", "unix://").split(":", 1)[0] not in ("unix", "npipe")
        cpu = f"engine {info.get('Name', '?')} ({info.get('ID', '?')})" if remote else cpu_model()
        return HostFingerprint(cpu_model=cpu, cores=int(sandbox.cpus), memory_mb=int(info.get("MemTotal") or 0) // (1 << 20),
                               kernel=str(info.get("KernelVersion", "")), sandbox="docker",
                               compiler=f"image {getattr(sandbox, 'image', '?')}")
    return HostFingerprint(cpu_model=cpu_model(), cores=int(sandbox.cpus), memory_mb=_host_memory_mb(),
                           kernel=platform.release(), sandbox=sandbox.name, compiler=_gcc_version())


def _load(path: Path) -> HardwareProfile | None:
    try:
        prof = HardwareProfile.model_validate_json(path.read_text())
    except (OSError, ValueError, ValidationError):
        return None  # missing, unreadable or from another version: measure again
    return prof if prof.version == PROBE_VERSION and prof.bandwidth_gbps and prof.peak_gflops else None


def cached_profile(sandbox: Sandbox) -> HardwareProfile | None:
    """The cached profile for this host and sandbox kind, or None. Never measures."""
    fp = fingerprint(sandbox)
    prof = _load(cache_path(fp))
    return prof if prof is not None and prof.fingerprint == fp else None


def _save(prof: HardwareProfile) -> Path:
    path = cache_path(prof.fingerprint)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".probe-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        f.write(prof.model_dump_json(indent=2) + "\n")
    os.replace(tmp, path)  # whole or not at all: a concurrent reader never sees half a file
    return path


# ------------------------------------------------------------------------------------------ measuring
def thread_counts(cores: int) -> list[int]:
    """1, 2, 4, ... below the core count, and the core count."""
    counts, t = [], 1
    while t < cores:
        counts.append(t)
        t *= 2
    return [*counts, max(1, cores)]


@dataclass
class ProbeOutput:
    """What the probe printed, parsed."""

    bandwidth: dict[int, float] = field(default_factory=dict)
    peak: dict[int, float] = field(default_factory=dict)
    llc_bytes: int = 0
    array_bytes: int = 0
    vector_bits: int = 0
    compiler: str = ""
    done: bool = False


def parse_output(text: str) -> ProbeOutput:
    """The probe's "key value" lines (see probe.c)."""
    out = ProbeOutput()
    for line in text.splitlines():
        key, _, rest = line.strip().partition(" ")
        if key in ("bandwidth", "peak"):
            t, value = rest.split()
            (out.bandwidth if key == "bandwidth" else out.peak)[int(t)] = float(value)
        elif key in ("llc_bytes", "array_bytes", "vector_bits"):
            setattr(out, key, int(rest))
        elif key == "compiler":
            out.compiler = rest
        elif key == "done":
            out.done = True
    return out


def measure(sandbox: Sandbox, say: Callable[[str], None] | None = None) -> HardwareProfile:
    """Compile and run the probe in `sandbox`; does not read or write the cache."""
    fp = fingerprint(sandbox)
    if sandbox.name == "local" and shutil.which("gcc") is None:
        raise ToolMissing("gcc not found on PATH: the hardware probe is compiled with gcc -fopenmp (see README, 'Set-up')")
    counts = thread_counts(fp.cores)
    cap_mb = CAP_MB if not fp.memory_mb else max(FLOOR_MB, min(CAP_MB, fp.memory_mb // 8))
    t0 = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="kernopt-hw-"))
    try:
        os.chmod(root, 0o755)
        work = root / "probe"
        work.mkdir()
        os.chmod(work, 0o755)
        (work / "probe.c").write_text((resources.files("kernopt.hw") / "probe.c").read_text())
        waited: dict[str, float] = {}
        with sandbox.session(root) as sb:
            with placement.hold("shared", waited):
                gcc = shutil.which("gcc") if sandbox.name == "local" else "gcc"  # the local sandbox's PATH is the base one
                r = sb.run([gcc or "gcc", "-O3", "-march=native", "-fopenmp", "probe.c", "-o", "probe"], work,
                           Limits(wall_s=120.0, memory_mb=2048), {})
            if not r.ok:
                raise InfraError(f"the hardware probe does not build in the {sandbox.name} sandbox: "
                                 f"{(r.stderr.strip().splitlines() or [f'exit {r.returncode}'])[-1][:200]}")
            if say:
                say(f"measuring memory bandwidth and peak FP64 at {', '.join(map(str, counts))} thread(s)")
            env = {"OMP_PLACES": "cores", "OMP_PROC_BIND": "close", "OMP_NUM_THREADS": str(max(counts))}
            with placement.hold("exclusive", waited):  # as a timing: nothing else of kernopt's runs meanwhile
                # Address space: the three arrays, the runtime, and every thread's stack.
                r = sb.run(["./probe", ",".join(map(str, counts)), str(REPS), str(FLOOR_MB), str(cap_mb)], work,
                           Limits(wall_s=WALL_S, memory_mb=3 * cap_mb + 512 + 80 * max(counts)), env)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    try:
        got = parse_output(r.stdout)
    except ValueError:
        got = ProbeOutput()
    if r.timed_out or not r.ok or not got.done:
        why = "timed out" if r.timed_out else f"exit {r.returncode}"
        raise InfraError(f"the hardware probe failed in the {sandbox.name} sandbox ({why}): "
                         f"{(r.stderr.strip().splitlines() or ['no output'])[-1][:200]}")
    if set(got.bandwidth) != set(counts) or set(got.peak) != set(counts) or min([*got.bandwidth.values(), *got.peak.values()]) <= 0:
        raise InfraError(f"the hardware probe reported incomplete figures: {r.stdout.strip()[-300:]}")
    return HardwareProfile(fingerprint=fp, bandwidth_gbps=got.bandwidth, peak_gflops=got.peak, llc_bytes=got.llc_bytes,
                           array_bytes=got.array_bytes, reps=REPS, vector_bits=got.vector_bits, probe_compiler=got.compiler,
                           measured_at=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                           probe_s=round(time.monotonic() - t0 - waited.get("wait", 0.0), 2))


def probe(sandbox: Sandbox, refresh: bool = False, say: Callable[[str], None] | None = None,
          replace: bool = False) -> HardwareProfile:
    """The profile for this host and sandbox: the cached one, or (when none is, or `refresh`) a fresh
    measurement, which is then cached. The cache is shared by every user of the host, so a measurement
    that looks busy (busy_signs) does not replace a cached one that does not: the cached one is kept and
    returned, and `say` is told so in one line, unless `replace` (`hw probe --refresh --replace`)."""
    if not refresh:
        prof = cached_profile(sandbox)
        if prof is not None:
            return prof
    prof = measure(sandbox, say)
    if prof.busy_signs() and not replace:
        old = cached_profile(sandbox)
        if old is not None and not old.busy_signs():
            if say:
                say(keep_message(old, prof))
            return old
    _save(prof)
    return prof


def keep_message(kept: HardwareProfile, fresh: HardwareProfile) -> str:
    """The one line that says a busy measurement did not replace the cached profile."""
    return (f"kept the cached hardware profile measured {kept.measured_at}: this measurement looks busy "
            f"({fresh.busy_signs()}; triad {fresh.bandwidth_all:.1f} GB/s vs {kept.bandwidth_all:.1f}); "
            "--replace saves it anyway")


def ensure_profile(sandbox: Sandbox, say: Callable[[str], None]) -> HardwareProfile | None:
    """For `optimize` and `eval`: the cached profile, else one measured now (saying so in one line).
    A probe that fails costs the roofline figures, never the run: None, with a one-line warning."""
    prof = cached_profile(sandbox)
    if prof is not None:
        if prof.busy_signs():
            say(f"the cached hardware profile looks measured on a busy machine ({prof.busy_signs()}): roofline fractions "
                f"are off until `kernopt hw probe --refresh` runs on a quiet one")
        return prof
    with _probe_lock():  # runs starting side by side (bench jobs) measure once, not each
        prof = cached_profile(sandbox)
        if prof is not None:
            return prof
        return _measure_saying(sandbox, say)


@contextlib.contextmanager
def _probe_lock() -> Iterator[None]:
    """An flock beside the cache files (none where the cache directory cannot be made: then no lock)."""
    try:
        cache_dir().mkdir(parents=True, exist_ok=True)
        fd = os.open(cache_dir() / ".probe.lock", os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _measure_saying(sandbox: Sandbox, say: Callable[[str], None]) -> HardwareProfile | None:
    say(f"no hardware profile for this machine yet: measuring memory bandwidth and peak FLOP/s once "
        f"(kernopt hw probe; cached under {cache_dir()})")
    try:
        return probe(sandbox, refresh=True)
    except (InfraError, ToolMissing) as e:
        say(f"hardware probe failed, so no roofline figures: {e}")
        return None


def profile_for_task(task: object, sandbox: Sandbox, say: Callable[[str], None]) -> HardwareProfile | None:
    """The profile a task's evaluations need: None for tasks without a [roofline] table and GPU tasks
    (nothing is measured for them), else ensure_profile()."""
    if getattr(task, "family", "") != "c" or getattr(task, "roofline", None) is None or getattr(task, "uses_gpu", False):
        return None
    return ensure_profile(sandbox, say)
