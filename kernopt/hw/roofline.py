"""The roofline figures of one timed result: achieved GB/s and GFLOP/s, which roof bounds the work,
and how close the candidate came to it (docs/roofline.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernopt.evaluators.result import Roofline, TimingStats

if TYPE_CHECKING:
    from kernopt.hw.probe import HardwareProfile
    from kernopt.task import RooflineSpec, Task


def roofline(flops: float, nbytes: float, seconds: float, profile: HardwareProfile, threads: int) -> Roofline:
    """Figures for `flops` and `nbytes` done in `seconds` by `threads` threads (or ranks): the roofs are
    the probed peak and bandwidth at that count; bound_s = max(flops / peak, bytes / bandwidth)."""
    if seconds <= 0 or threads < 1:
        raise ValueError(f"roofline needs a positive time and thread count (got {seconds} s, {threads} threads)")
    peak, bandwidth = profile.peak_at(threads), profile.bandwidth_at(threads)
    compute_s, memory_s = flops / (peak * 1e9), nbytes / (bandwidth * 1e9)
    bound_s = max(compute_s, memory_s)
    return Roofline(flops=flops, bytes=nbytes, seconds=seconds, gflops=flops / seconds / 1e9, gbps=nbytes / seconds / 1e9,
                    threads=threads, peak_gflops=peak, bandwidth_gbps=bandwidth,
                    bound="memory" if memory_s >= compute_s else "compute", bound_s=bound_s, fraction=bound_s / seconds,
                    profile=profile.fingerprint.key)


def workers(task: Task, timing: TimingStats) -> int:
    """Threads x ranks the timing ran with (a serial task: 1)."""
    threads = (timing.threads or task.timing.threads) if task.uses_openmp else 1
    ranks = (timing.ranks or task.timing.ranks) if task.uses_mpi else 1
    return max(1, threads * ranks)


def for_timing(task: Task, spec: RooflineSpec, timing: TimingStats, profile: HardwareProfile) -> Roofline:
    """The candidate's figures: the task's work at its timing size over the candidate's median time."""
    flops, nbytes = spec.work(task.sizes.timing)
    return roofline(flops, nbytes, timing.candidate_median_s, profile, workers(task, timing))
