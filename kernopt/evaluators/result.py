"""EvalResult: the typed verdict on one candidate, exactly as the run log stores it."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from kernopt.candidate import Candidate

# A candidate is faster only when the rank test's p-value is below this level (see stats.py).
SIGNIFICANCE = 0.01
# A verified candidate is timed against the search's best (PairedComparison) when it may beat it: its baseline-relative
# interval reaches PAIR_MARGIN x the best's speedup, or its own median time per call is within 1 / PAIR_MARGIN of the
# best's. Separate evaluations' baseline timings were seen 20% apart (0.832 s vs 0.692 s on one gemm): a margin of 10%
# on either figure lets a truly faster candidate through to the paired timing, which alone decides.
PAIR_MARGIN = 0.9
# A speedup up to this factor above the verified best's is no jump: not implausible, no recheck (issue 28).
PLAUSIBLE_JUMP = 2.0

Status = Literal["ok", "unverified", "compile_error", "runtime_error", "timeout", "wrong_answer", "rejected", "infra_error"]
# "unverified": built (and for CUDA: its resource report read) but not run, because the target's
# hardware is not here (a CUDA candidate on a machine without a GPU). Never counts as a speedup.

# Fixed rewards for failures (DESIGN.md: log(speedup) for verified candidates, penalties otherwise).
PENALTY: dict[str, float] = {
    "compile_error": -1.0,
    "runtime_error": -1.0,
    "timeout": -1.0,
    "wrong_answer": -1.5,
    "rejected": -2.0,
    "infra_error": 0.0,
    "unverified": 0.0,
}


class KernelResources(BaseModel):
    """What ptxas reports for one compiled GPU kernel (nvcc -Xptxas -v)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="The kernel's (demangled where possible) name.")
    arch: str = Field("", description="e.g. sm_90")
    registers: int = 0
    spill_stores: int = Field(0, description="Bytes of register spill stores.")
    spill_loads: int = Field(0, description="Bytes of register spill loads.")
    shared_bytes: int = Field(0, description="Static shared memory per block.")
    stack_bytes: int = Field(0, description="Stack frame bytes.")
    constant_bytes: int = 0

    def describe(self) -> str:
        spills = f", spills {self.spill_stores}/{self.spill_loads} B" if self.spill_stores or self.spill_loads else ", no spills"
        return f"{self.name}: {self.registers} registers{spills}, {self.shared_bytes} B shared, {self.stack_bytes} B stack"


class Verification(BaseModel):
    """The evidence behind a verdict: what was checked, and how."""

    model_config = ConfigDict(extra="forbid")

    sizes: list[int] = Field(default_factory=list, description="Sizes checked, including the ones drawn at random.")
    seeds: int = Field(0, description="Seeds per size.")
    threads: list[int] = Field(default_factory=list, description="OpenMP thread counts checked.")
    ranks: list[int] = Field(default_factory=list, description="MPI rank counts checked.")
    shapes: list[dict[str, int]] = Field(default_factory=list, description="Torch family: shapes checked, including drawn ones.")
    device: str = Field("", description="Torch/CUDA family: where outputs were computed ('NVIDIA H100 80GB HBM3', "
                        "'cpu (Triton interpreter)', 'none: compiled only').")
    race_check: Literal["clean", "race", "unavailable", "skipped", "off", "not_run", "forged", "unproven"] = Field(
        "not_run", description="The OpenMP race check: clean (no race reported by the sanitizer, and the static check "
        "proved the kernel race-free or could not tell: race_detail says which), race (found by either check), "
        "unavailable (could not run: rejected), forged (the sanitizer's report file holds what the sanitizer does not "
        "write: rejected), unproven (the static check could not prove the kernel race-free and it may store where the "
        "sanitizer is blind, or eval.race_static is require: rejected), skipped (the kernel makes no OpenMP runtime "
        "calls), off (turned off by the user or the task), not_run (not reached).")
    race_detail: str = ""
    max_abs_err: float | None = None
    max_rel_norm_err: float | None = None
    timed_outputs_checked: bool = False


class TimingStats(BaseModel):
    """Interleaved timing of baseline and candidate in one session."""

    model_config = ConfigDict(extra="forbid")

    baseline_s: list[float]
    candidate_s: list[float]
    baseline_median_s: float
    candidate_median_s: float
    speedup: float = Field(description="median(baseline) / median(candidate).")
    ci_low: float
    ci_high: float
    p_value: float = Field(description="One-sided Mann-Whitney U on per-process medians: candidate faster than baseline.")
    paired_low: float | None = Field(None, description="99% one-sided lower bound of the speedup from the rounds' paired "
                                     "log ratios (None in runs logged before it existed).")
    consistent: bool = Field(True, description="In-process timings agree with the sandbox's wall clock.")
    reruns: list[str] = Field(default_factory=list, description="Rounds re-run because the machine disturbed them, and why "
                              "(stats.disturbed: judged on the round's baseline process only).")
    machine_busy: bool = Field(False, description="Too many rounds were disturbed to time this candidate: never significant; "
                               "re-run on a quieter machine.")
    threads: int | None = None
    ranks: int | None = None
    device: str = Field("", description="GPU timings: the device name.")
    eager_median_s: float | None = Field(None, description="GPU: the reference Model in eager PyTorch, timed in the same rounds.")
    compile_median_s: float | None = Field(None, description="GPU: torch.compile of the reference, where it worked.")

    @property
    def speedup_vs_eager(self) -> float | None:
        return self.eager_median_s / self.candidate_median_s if self.eager_median_s else None

    @property
    def speedup_vs_compile(self) -> float | None:
        return self.compile_median_s / self.candidate_median_s if self.compile_median_s else None

    def describe(self) -> str:
        """One line: speedup, interval and verdict."""
        if self.machine_busy:
            return (f"{self.speedup:.2f}x [{self.ci_low:.2f}, {self.ci_high:.2f}] (machine too busy to time this: "
                    f"{len(self.reruns)} rounds disturbed; re-run on a quieter machine)")
        verdict = "faster" if self.significant else "not significantly faster"
        if self.reruns:
            verdict += f"; {len(self.reruns)} disturbed round{'s' * (len(self.reruns) > 1)} re-run"
        return f"{self.speedup:.2f}x [{self.ci_low:.2f}, {self.ci_high:.2f}] ({verdict})"

    @property
    def significant(self) -> bool:
        """Faster only when the whole bootstrap interval is above 1, the rank test agrees at the 1%
        level, the paired per-round bound is above 1, and the reported kernel times are consistent
        with the process wall clock, and the machine was not too busy to time it."""
        return (not self.machine_busy and self.ci_low > 1.0 and self.p_value < SIGNIFICANCE and self.paired_low is not None and self.paired_low > 1.0
                and self.consistent)


def _num(x: float) -> str:
    """3 significant figures, without exponents for everyday magnitudes."""
    return f"{x:.0f}" if abs(x) >= 100 else (f"{x:.1f}" if abs(x) >= 10 else (f"{x:.2f}" if abs(x) >= 0.01 else f"{x:.2g}"))


def fmt_seconds(s: float) -> str:
    """A time per call with 3 significant figures in a fitting unit: '34.1 ms', '1.23 s', '512 us'."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(s) >= scale or unit == "us":
            return f"{_num(s / scale)} {unit}"
    return f"{s} s"  # unreachable


def fmt_percent(fraction: float) -> str:
    """A fraction as a percentage with sensible digits: '38%', '4.2%', '0.031%'."""
    pct = 100 * fraction
    return f"{pct:.0f}%" if pct >= 10 else (f"{pct:.1f}%" if pct >= 0.1 else f"{pct:.2g}%")


class Roofline(BaseModel):
    """Where a timed candidate stands against this machine's roofs (kernopt/hw, docs/roofline.md): the
    task's declared work at the timing size ([roofline] in task.toml), the candidate's median time, and
    the probed bandwidth and peak at the thread (or rank) count it was timed with."""

    model_config = ConfigDict(extra="forbid")

    flops: float = Field(description="Floating-point operations of one call at the timing size (the task's formula).")
    bytes: float = Field(description="Compulsory memory traffic of one call at the timing size, in bytes (the task's formula).")
    seconds: float = Field(description="The candidate's median time per call that the figures divide by.")
    gflops: float = Field(description="Achieved GFLOP/s: flops / seconds / 1e9.")
    gbps: float = Field(description="Achieved GB/s: bytes / seconds / 1e9.")
    threads: int = Field(description="Threads (x ranks) the candidate was timed with: the roofs are taken there.")
    peak_gflops: float = Field(description="Probed FP64 peak at `threads` (GFLOP/s).")
    bandwidth_gbps: float = Field(description="Probed triad bandwidth at `threads` (GB/s, write-allocate not counted).")
    bound: Literal["memory", "compute"] = Field(description="Which roof is lower for this work: bytes/bandwidth vs flops/peak.")
    bound_s: float = Field(description="The roofline time: max(flops / peak, bytes / bandwidth).")
    fraction: float = Field(description="bound_s / seconds: 1.0 = at the hardware limit; above 1 = beyond what the "
                            "roofs allow (data served from cache, or less work than the formula counts).")
    profile: str = Field("", description="The hardware profile's fingerprint key (its cache file).")

    @property
    def intensity(self) -> float | None:
        """Arithmetic intensity, flop per byte (None without bytes)."""
        return self.flops / self.bytes if self.bytes > 0 else None

    def describe(self) -> str:
        """One line: '12.3 GB/s, 4.10 GFLOP/s; memory-bound, 38% of the bound (bandwidth 32.0 GB/s at 2 threads)'."""
        share = fmt_percent(self.fraction)
        roof = (f"bandwidth {_num(self.bandwidth_gbps)} GB/s" if self.bound == "memory" else f"peak {_num(self.peak_gflops)} GFLOP/s")
        unit = "thread" if self.threads == 1 else "threads"
        return (f"{_num(self.gbps)} GB/s, {_num(self.gflops)} GFLOP/s; {self.bound}-bound, {share} of the bound "
                f"({roof} at {self.threads} {unit})")


class PairedComparison(BaseModel):
    """A candidate timed interleaved against the current best's program (same rounds, alternating order),
    not against the baseline: the search's "new best" decision rests on this ratio, because two speedups
    from separate evaluations each divide by their own baseline timing (a 1% slower child can read 5-20%
    worse, or better, by its baseline's luck)."""

    model_config = ConfigDict(extra="forbid")

    best_id: str = Field(description="The best candidate the comparison ran against.")
    ratio: float = Field(description="median(best) / median(candidate) per call: above 1 = the candidate is faster.")
    ci_low: float = Field(description="Bootstrap 95% interval of the ratio, low end.")
    ci_high: float = Field(description="Bootstrap 95% interval of the ratio, high end.")
    paired_low: float | None = Field(None, description="99% one-sided lower bound of the ratio from the rounds' paired log ratios.")
    p_value: float = Field(1.0, description="One-sided Mann-Whitney U: candidate faster than the best.")
    candidate_median_s: float = Field(description="The candidate's median seconds per call in these rounds.")
    best_median_s: float = Field(description="The best's median seconds per call in these rounds.")
    machine_busy: bool = Field(False, description="Too many rounds disturbed: never decides for the candidate.")
    replaces_best: bool = Field(False, description="The decision: the candidate is significantly faster than the best "
                                "(the evaluator's significance rule applied to the pair).")

    @classmethod
    def of(cls, best_id: str, timing: TimingStats) -> PairedComparison:
        """The comparison from a TimingStats whose 'baseline' side was the best's program: the decision is the
        evaluator's significance rule (TimingStats.significant) applied to the pair."""
        return cls(best_id=best_id, ratio=timing.speedup, ci_low=timing.ci_low, ci_high=timing.ci_high,
                   paired_low=timing.paired_low, p_value=timing.p_value, candidate_median_s=timing.candidate_median_s,
                   best_median_s=timing.baseline_median_s, machine_busy=timing.machine_busy, replaces_best=timing.significant)

    def describe(self) -> str:
        """'vs best: 0.99x [0.97, 1.01]'."""
        return f"vs best: {self.ratio:.2f}x [{self.ci_low:.2f}, {self.ci_high:.2f}]"


class VerifiedBest(BaseModel):
    """What an evaluation is told of the search's current best (set by the search, passed to the evaluator
    explicitly): whom to time a candidate against, and the verified speedup that plausibility is judged
    against. A best is verified: significantly faster than the baseline in its evaluation, rechecked there
    in fresh processes if it was implausible, and proven faster than the best before it in paired timing."""

    model_config = ConfigDict(extra="forbid")

    candidate: Candidate
    speedup: float = Field(description="Its baseline-relative speedup, from its own evaluation.")
    median_s: float = Field(description="Its median seconds per call in that evaluation.")

    @classmethod
    def of(cls, candidate: Candidate, result: EvalResult) -> VerifiedBest | None:
        """The best as an evaluator sees it; None for a result with no timing."""
        if result.timing is None or result.speedup is None:
            return None
        return cls(candidate=candidate, speedup=result.speedup, median_s=result.timing.candidate_median_s)

    def may_be_beaten(self, timing: TimingStats) -> bool:
        """Worth a paired timing: the candidate's interval reaches PAIR_MARGIN x the best's speedup, or its own
        time per call is within 1 / PAIR_MARGIN of the best's."""
        return timing.ci_high >= PAIR_MARGIN * self.speedup or timing.candidate_median_s * PAIR_MARGIN <= self.median_s

    def plausible(self, speedup: float) -> bool:
        """No jump: at most PLAUSIBLE_JUMP x the verified best's speedup."""
        return speedup <= PLAUSIBLE_JUMP * self.speedup


class EvalResult(BaseModel):
    """Why a candidate passed or failed, with the numbers behind it."""

    model_config = ConfigDict(extra="forbid")

    candidate_id: str
    status: Status
    reason: str = Field("", description="One line: what failed, or a summary of success.")
    log: str = Field("", description="Compiler/runtime/sanitizer output excerpt for the failure.")
    verification: Verification = Verification()
    timing: TimingStats | None = None
    flags: list[str] = Field(default_factory=list, description="Review flags, e.g. 'implausible_speedup'.")
    phase_s: dict[str, float] = Field(default_factory=dict, description="Wall seconds per phase (build, verify, race, time).")
    resources: list[KernelResources] = Field(default_factory=list, description="CUDA: per-kernel registers, spills, shared memory.")
    roofline: Roofline | None = Field(None, description="Achieved GB/s and GFLOP/s against the machine's roofs, for a timed "
                                      "result of a task with a [roofline] table (None otherwise, and in runs logged before it existed).")
    vs_best: PairedComparison | None = Field(None, description="The candidate timed interleaved against the search's current "
                                             "best (None: no comparison ran - not verified, not near the best, no best yet, "
                                             "or runs logged before it existed).")
    compiler_report: str | None = Field(None, description="C family (gcc): a compact report on the candidate's kernel from a "
                                        "second compile of its source that is not linked: which loops of the kernel file gcc "
                                        "vectorized and why not (-fopt-info-vec-optimized/-missed) and each function's stack frame "
                                        "(-fstack-usage), at most 15 lines (evaluators/c_family/optinfo.py). Compiler output about "
                                        "untrusted source: advice for the LLM roles, never part of a verdict. None: not built, "
                                        "not gcc, or runs logged before it existed.")

    @property
    def speedup(self) -> float | None:
        return self.timing.speedup if (self.status == "ok" and self.timing) else None

    @property
    def faster(self) -> bool:
        return self.status == "ok" and self.timing is not None and self.timing.significant

    @property
    def reward(self) -> float:
        if self.status == "ok":
            return math.log(self.timing.speedup) if self.timing else 0.0
        return PENALTY[self.status]

    def summary(self) -> dict[str, object]:
        """The machine-readable view printed by `--json`."""
        return {
            "candidate_id": self.candidate_id,
            "status": self.status,
            "reason": self.reason,
            "speedup": self.speedup,
            "ci": [self.timing.ci_low, self.timing.ci_high] if self.speedup is not None and self.timing else None,
            "significant": self.faster,
            "flags": self.flags,
            **({"median_s": self.timing.candidate_median_s} if self.speedup is not None and self.timing else {}),
            **({"vs_best": self.vs_best.model_dump()} if self.vs_best else {}),
            **({"speedup_vs_eager": self.timing.speedup_vs_eager, "speedup_vs_compile": self.timing.speedup_vs_compile}
               if self.speedup is not None and self.timing and self.timing.eager_median_s else {}),
            **({"resources": [r.model_dump() for r in self.resources]} if self.resources else {}),
            **({"roofline": self.roofline.model_dump()} if self.roofline else {}),
        }
