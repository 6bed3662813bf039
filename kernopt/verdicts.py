"""One-line explanations of every flag and verdict an evaluation can carry, in one place, so the
prompts (critic, planner, executor), the progress display and the report can say what each means and
what it implies, in the same words. `explain(word)` looks one up; unknown words explain as ""."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernopt.evaluators.result import EvalResult

# EvalResult.flags
FLAGS: dict[str, str] = {
    "implausible_speedup": "above the plausible bound (eval.plausible_max_speedup, 10x unless set): re-measured in a "
                           "fresh sandbox before it counts; routine for a real large win (a blocked, vectorized rewrite "
                           "of a naive loop), which survives that, while a timing artefact does not",
    "timing_inconsistent": "the kernel times the monitor measured do not add up to the process wall clock, so it is "
                           "not counted as faster (interference, or a kernel that works outside the timed call)",
    "no_gpu_timing": "no GPU here: verified with the Triton interpreter or only compiled, never timed, so no speedup "
                     "is reported",
    "rechecked": "the first timing looked too good or inconsistent, so it was timed again with more rounds in fresh "
                 "processes; the figures shown are that second measurement's",
    "machine_busy": "too many timing rounds were disturbed by other work on the machine: not counted as faster; "
                    "time it again when the machine is quieter",
}

# TimingStats.significant, as worded in prompts and summaries
SIGNIFICANCE: dict[str, str] = {
    "significant": "the whole 95% interval and the paired per-round bound are above 1 and the rank test agrees "
                   "(p < 0.01): the speedup is proven and counts",
    "not significant": "the 95% interval or the paired per-round bound reaches 1 (or p >= 0.01, or the timing is "
                       "inconsistent), so the speedup is not proven and does not count",
}

# Verification.race_check
RACE: dict[str, str] = {
    "clean": "the race detector ran the kernel at every checked thread count and found no data race, and the static "
             "race check proved it race-free from its source or could not tell (the detail says which)",
    "race": "the race detector found a data race (or the static race check found one in the source): the candidate is "
            "rejected",
    "forged": "the race detector's report file held text the detector does not write (the kernel wrote to it): "
              "the candidate is rejected",
    "unproven": "the static race check could not prove the kernel race-free, and a clean detector run alone is no "
                "proof (a kernel can behave differently when instrumented): the candidate is rejected",
    "unavailable": "the race detector could not run on this kernel (it crashed or was refused), so the candidate "
                   "is rejected: it cannot be shown race-free",
    "skipped": "the kernel makes no OpenMP runtime calls: there is nothing to race-check",
    "off": "the race check was turned off by the user or the task: races are not detected",
    "not_run": "the evaluation stopped before the race check",
}

# EvalResult.status
STATUS: dict[str, str] = {
    "ok": "built, verified against the reference and timed",
    "unverified": "built but not run: the target's hardware is not here; never counts as a speedup",
    "compile_error": "the compiler rejected it",
    "runtime_error": "it crashed or exited with an error while being verified or timed",
    "timeout": "it ran past the time limit",
    "wrong_answer": "its outputs differ from the reference beyond the tolerances (or it changed its inputs)",
    "rejected": "a gate refused it (static rules, sanitizer or race check) before or instead of timing",
    "infra_error": "the evaluation itself failed (sandbox or machine), not the candidate",
}

ALL: dict[str, str] = {**STATUS, **RACE, **SIGNIFICANCE, **FLAGS}


def explain(word: str) -> str:
    """The one-line explanation of a flag, verdict or status ("" when unknown)."""
    return ALL.get(word, "")


def shown(result: EvalResult) -> list[str]:
    """The words a display of `result` shows: its status, race verdict (when the check was reached), its
    significance verdict (when timed) and its flags."""
    words: list[str] = [result.status]
    if result.verification.race_check != "not_run":
        words.append(result.verification.race_check)
    if result.status == "ok" and result.timing is not None:
        words.append("significant" if result.timing.significant else "not significant")
    return words + list(result.flags)


def legend(words: Iterable[str]) -> list[str]:
    """"word: meaning" for each explained word, once each, in first-seen order (unknown words left out)."""
    return [f"{w}: {explain(w)}" for w in dict.fromkeys(words) if explain(w)]


def explained(words: list[str]) -> list[str]:
    """Each word with its explanation: ["implausible_speedup: above the plausible bound ...", ...]."""
    return [f"{w}: {explain(w)}" if explain(w) else w for w in words]
