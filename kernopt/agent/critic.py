"""The critique model: one evaluation's raw evidence (compiler errors, race reports, wrong-answer
evidence, timing statistics) in, a structured diagnosis out. A malformed answer never stops the run:
the critique falls back to one built from the result itself."""

from __future__ import annotations

from typing import Any

from kernopt.agent.base import Critique, SearchState
from kernopt.agent.extract import extract_json
from kernopt.candidate import Candidate
from kernopt.evaluators.result import EvalResult
from kernopt.model import Model
from kernopt.prompts import clip, compiler_report, diff, flat, one_line, render_bounded, shared, verdict_words
from kernopt.verdicts import explain, explained

# The parent diff goes to the critic only when it is at most this share of the kernel file: a small
# change is easier to judge as a diff; a rewrite is the file again, which the critic already gets whole.
DIFF_SHARE = 0.4


def find_candidate(state: SearchState, candidate_id: str | None) -> Candidate | None:
    """The baseline or an evaluated candidate by id."""
    if candidate_id is None:
        return None
    if candidate_id == state.baseline.id:
        return state.baseline
    return next((c for c, _ in state.history if c.id == candidate_id), None)


def result_vars(result: EvalResult, log_chars: int = 4000) -> dict[str, Any]:
    """The evaluation as the critic template reads it (long logs clipped, head and tail kept)."""
    v, t = result.verification, result.timing
    return {
        "status": result.status, "reason": one_line(result.reason, 800), "log": clip(result.log, log_chars),
        "race_check": v.race_check, "race_detail": clip(v.race_detail, log_chars // 2),
        "verification": {"sizes": v.sizes, "seeds": v.seeds, "threads": v.threads, "ranks": v.ranks,
                         "max_abs_err": v.max_abs_err, "max_rel_norm_err": v.max_rel_norm_err,
                         "shapes": v.shapes, "device": v.device},
        "resources": [r.describe() for r in result.resources],
        "compiler_report": compiler_report(result.compiler_report),  # capped by the evaluator (optinfo.py); "" where none
        "timing": None if t is None else {
            "speedup": t.speedup, "ci_low": t.ci_low, "ci_high": t.ci_high, "p_value": t.p_value,
            "baseline_median_s": t.baseline_median_s, "candidate_median_s": t.candidate_median_s,
            "threads": t.threads, "ranks": t.ranks, "significant": t.significant, "device": t.device,
            "speedup_vs_eager": t.speedup_vs_eager, "speedup_vs_compile": t.speedup_vs_compile},
        "phase_s": dict(result.phase_s), "flags": list(result.flags),
        # the paired comparison with the best (EvalResult.vs_best, where the evaluator ran one)
        "vs_best": result.vs_best.model_dump() if result.vs_best is not None else None,
        # one line per verdict shown, from kernopt.verdicts
        "notes": {"status": explain(result.status), "race": explain(v.race_check),
                  "significance": explain("significant" if t is not None and t.significant else "not significant"),
                  "flags": explained(list(result.flags))},
        "roofline": None if result.roofline is None or t is None else {
            "line": result.roofline.describe(), "bound": result.roofline.bound, "fraction": result.roofline.fraction,
            "baseline_fraction": result.roofline.bound_s / t.baseline_median_s if t.baseline_median_s > 0 else None,
            "intensity": result.roofline.intensity,
            "balance": result.roofline.peak_gflops / result.roofline.bandwidth_gbps},
    }


def critic_diff(old: str | None, new: str, name: str) -> tuple[str, str]:
    """(diff, note) for the critic, which always gets the whole file once: the unified diff from the
    parent when it is small next to the file (at most DIFF_SHARE of it), else no diff and a note of
    how much changed."""
    if old is None or old == new:
        return "", ""
    d = diff(old, new, name, max_lines=1_000_000)
    if len(d) <= DIFF_SHARE * max(len(new), 1):
        return d, ""
    changed = sum(1 for line in d.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---")))
    return "", (f"{changed} lines differ from the parent (most of the file), so no diff is shown: "
                "the whole new file is below")


def fallback_critique(candidate: Candidate, result: EvalResult) -> Critique:
    """The critique when the model's answer is unusable: the evaluator's own one-line reason."""
    return Critique(candidate_id=candidate.id, status=result.status,
                    diagnosis=result.reason or f"the evaluation ended with status {result.status}")


def parse_critique(text: str, candidate: Candidate, result: EvalResult) -> Critique | None:
    """{"diagnosis": str, "bottleneck": str, "next_ideas": [str]} -> Critique, or None when malformed."""
    data, _ = extract_json(text, keys=("diagnosis",))
    if data is None or not isinstance(data.get("diagnosis"), str) or not data["diagnosis"].strip():
        return None
    ideas = data.get("next_ideas", [])
    if isinstance(ideas, str):
        ideas = [ideas]
    if not isinstance(ideas, list):
        ideas = []
    bottleneck = data.get("bottleneck")
    # kept whole: the planner and the executor get the critique as the critic wrote it
    return Critique(candidate_id=candidate.id, status=result.status, diagnosis=data["diagnosis"].strip(),
                    bottleneck=flat(bottleneck) if isinstance(bottleneck, str) else "",
                    next_ideas=[i.strip() for i in ideas if isinstance(i, str) and i.strip()])


class LLMCritic:
    """Critic backed by a model (role "critic"). Each critique is logged as a "critique" event."""

    name = "llm"

    def __init__(self, model: Model, *, history: int = 6, log_chars: int = 4000, prompt_chars: int = 60_000) -> None:
        self.model = model
        self.history = history
        self.log_chars = log_chars
        self.prompt_chars = prompt_chars  # a longer prompt loses its oldest history lines first

    def critique(self, state: SearchState, candidate: Candidate, result: EvalResult) -> Critique:
        crit: Critique | None = None
        if result.status != "infra_error":  # not the candidate's doing: nothing to diagnose
            answer = self._ask(state, candidate, result)
            try:
                crit = parse_critique(answer, candidate, result)
            except Exception:  # noqa: BLE001 - an untrusted answer that breaks the parser: the fallback below
                crit = None
        fell_back = crit is None
        crit = crit or fallback_critique(candidate, result)
        state.log("critique", candidate_id=candidate.id, critique=crit.model_dump(), fallback=fell_back)
        return crit

    def _ask(self, state: SearchState, candidate: Candidate, result: EvalResult) -> str:
        kernel = state.task.kernel
        code = candidate.files.get(kernel, "")
        parent = find_candidate(state, candidate.parent)
        change, change_note = critic_diff(parent.files.get(kernel, "") if parent is not None else None, code, kernel)
        prompt = render_bounded(
            "critic", self.prompt_chars,
            shared(state, last=self.history, elsewhere=(candidate.id,), explained_below=tuple(verdict_words([result]))), code=code,
            candidate={"id": candidate.id, "idea": candidate.idea.strip() or "(no idea given)",
                       "parent": candidate.parent, "author": candidate.author, "knobs": candidate.knobs()},
            diff=change, diff_note=change_note, result=result_vars(result, self.log_chars),
            standing=standing(state, candidate))
        return self.model.complete([{"role": "user", "content": prompt}], role="critic").text


def standing(state: SearchState, candidate: Candidate) -> dict[str, object]:
    """Where the candidate stands in the search: whether it is the best now (the search's parent), else the
    best's id and speedup. A real model misread "faster, significant" (against the baseline) as a win over
    the best, and could not tell whether a candidate was kept (stencil2d, 2026-11-25)."""
    best = state.parent
    r = state.result_of(best.id)
    return {"kept": best.id == candidate.id, "best_id": best.id, "best_is_baseline": best.id == state.baseline.id,
            "best_speedup": r.speedup if r is not None and r.timing is not None else None,
            "best_time_s": r.timing.candidate_median_s if r is not None and r.timing is not None else None}
