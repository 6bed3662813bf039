"""What a performance engineer would ask before changing a C-family kernel, as short prompt lines:
the machine (CPU model, vector ISA, caches, cores, the measured bandwidth and FP64 peak and whether
that measurement looks disturbed), the numeric tolerances of the task, and what the gates refuse.

Each piece is a few lines (the whole is about 1-1.5 KB) and goes to every role through
prompts.shared, so the planner, the executor and the critic reason from the same facts. The CPU is
read from /proc/cpuinfo and /sys/devices/system/cpu/cpu0/cache of the machine kernopt runs on (a
docker sandbox runs on the same CPU); anything unreadable is left out, never guessed.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

# The ISA flags worth a line (what the compiler may target with -march=native or intrinsics).
ISA = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512dq", "avx512bw", "avx512vl", "avx512_bf16", "amx_tile", "sve", "asimd")


@cache
def cpu() -> dict[str, Any]:
    """{"model": str, "isa": [flags], "caches": ["L1d 32K", ...]} of cpu0 ("" / [] where unreadable)."""
    model = ""
    flags: set[str] = set()
    ids: dict[str, str] = {}  # x86 "cpu family" / "model" / "stepping": a bare "AMD EPYC" names no generation
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key in ("model name", "Model", "cpu model") and not model:
                model = value.strip()
            elif key in ("flags", "Features") and not flags:
                flags = set(value.split())
            elif key in ("cpu family", "model", "stepping") and key not in ids and value.strip().isdigit():
                ids[key] = value.strip()
    except OSError:
        pass
    if model and "cpu family" in ids and "model" in ids:
        model += f" (family {ids['cpu family']}, model {ids['model']}" + (f", stepping {ids['stepping']})" if "stepping" in ids else ")")
    caches: list[str] = []
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = (index / "size").read_text().strip()
        except OSError:
            continue
        caches.append(f"L{level}{ {'Data': 'd', 'Instruction': 'i'}.get(kind, '') } {size}")
    return {"model": model, "isa": [f for f in ISA if f in flags], "caches": [c for c in caches if not c.startswith("L1i")]}


def machine_lines(profile: Any, cores: int) -> list[str]:
    """The machine in a few lines; `profile` is a kernopt.hw.probe.HardwareProfile or None."""
    info = cpu()
    lines = []
    if info["model"]:
        lines.append(f"CPU: {info['model']}")
    if info["isa"]:
        lines.append(f"vector ISA: {' '.join(info['isa'])}")
    if info["caches"]:
        lines.append(f"caches (per cpu0): {', '.join(info['caches'])}")
    if profile is not None:
        bw = ", ".join(f"{bw:.1f} GB/s at {t} thread{'s' if t != 1 else ''}" for t, bw in sorted(profile.bandwidth_gbps.items()))
        peak = ", ".join(f"{p:.1f} GFLOP/s at {t} thread{'s' if t != 1 else ''}" for t, p in sorted(profile.peak_gflops.items()))
        lines.append(f"measured memory bandwidth (STREAM triad): {bw}")
        lines.append(f"measured FP64 peak (FMA, {profile.vector_bits}-bit vectors): {peak}; machine balance "
                     f"{profile.balance:.2f} flop/byte")
        busy = profile.busy_signs()
        lines.append("this profile looks disturbed (" + busy + "): treat the roofs as lower bounds" if busy
                     else f"the profile looks undisturbed (measured {profile.measured_at[:10]})")
    return lines


def tolerance_line(task: Any) -> str:
    """The verification tolerances in numbers (C family), with what they allow."""
    v = task.verify
    fast = ("allowed" if v.allow_fast_math else
            "not allowed (-ffast-math, -ffp-contract=fast and the like are refused as flags; FMA contraction gcc does "
            "by itself under -march=native/-mfma and reassociating a reduction by hand are not refused, but the result "
            "must still pass these tolerances at every size)")
    text = (f"outputs must match the reference within rtol {v.rtol:g}, atol {v.atol:g} elementwise and {v.norm_rtol:g} "
            f"in relative norm; fast-math: {fast}")
    own = [f"{name}: rtol {o.rtol}, atol {o.atol}, norm_rtol {o.norm_rtol}" for name, o in getattr(v, "outputs", {}).items()]
    return text + (f"; per output: {'; '.join(own)}" if own else "")


def gate_lines(task: Any) -> list[str]:
    """What the static and object gates refuse (C family), from their own tables."""
    from kernopt.evaluators.c_family import static_gate as g

    calls = ", ".join(sorted(g._FORBIDDEN_CALLS))
    words = ", ".join(sorted(g._FORBIDDEN_WORDS))
    return [
        "the kernel may call only: libm (sqrt, exp, fma, ... and their f/l forms), malloc/calloc/realloc/free/"
        "aligned_alloc/posix_memalign, memcpy/memmove/memset/memcmp, qsort/bsearch, abs/labs/llabs"
        + (", omp_* (not omp_get_wtime/omp_get_wtick)" if task.uses_openmp else "")
        + (", MPI_* (not MPI_Wtime, file I/O, spawning, Init/Finalize/Abort)" if task.uses_mpi else "")
        + "; any other external symbol (e.g. sched_yield, pthread_*, intrinsics that lower to a library call) "
          "is refused at link time; compiler builtins that become instructions are fine",
        f"refused calls: {calls}",
        f"refused words: {words}; attributes constructor/destructor/alias/weak/ifunc/section/optimize/target_clones "
        "and no_sanitize; #pragma GCC optimize; includes other than <system> headers",
        f"a source larger than {g.MAX_SOURCE_BYTES // 1024} KB",
    ]
