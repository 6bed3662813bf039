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
from kernopt.prompts import clip, diff, knobs, one_line, render, shared


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
        "timing": None if t is None else {
            "speedup": t.speedup, "ci_low": t.ci_low, "ci_high": t.ci_high, "p_value": t.p_value,
            "baseline_median_s": t.baseline_median_s, "candidate_median_s": t.candidate_median_s,
            "threads": t.threads, "ranks": t.ranks, "significant": t.significant, "device": t.device,
            "speedup_vs_eager": t.speedup_vs_eager, "speedup_vs_compile": t.speedup_vs_compile},
        "phase_s": dict(result.phase_s), "flags": list(result.flags),
        "roofline": None if result.roofline is None or t is None else {
            "line": result.roofline.describe(), "bound": result.roofline.bound, "fraction": result.roofline.fraction,
            "baseline_fraction": result.roofline.bound_s / t.baseline_median_s if t.baseline_median_s > 0 else None,
            "intensity": result.roofline.intensity,
            "balance": result.roofline.peak_gflops / result.roofline.bandwidth_gbps},
    }


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
    return Critique(candidate_id=candidate.id, status=result.status, diagnosis=one_line(data["diagnosis"], 1200),
                    bottleneck=one_line(bottleneck, 120) if isinstance(bottleneck, str) else "",
                    next_ideas=[one_line(i, 300) for i in ideas if isinstance(i, str) and i.strip()][:6])


class LLMCritic:
    """Critic backed by a model (role "critic"). Each critique is logged as a "critique" event."""

    name = "llm"

    def __init__(self, model: Model, *, history: int = 6, log_chars: int = 4000) -> None:
        self.model = model
        self.history = history
        self.log_chars = log_chars

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
        prompt = render(
            "critic", **shared(state, last=self.history), code=code,
            candidate={"id": candidate.id, "idea": one_line(candidate.idea, 300) or "(no idea given)",
                       "parent": candidate.parent, "author": candidate.author, "knobs": knobs(candidate)},
            diff=diff(parent.files.get(kernel, ""), code, kernel) if parent is not None else "",
            result=result_vars(result, self.log_chars))
        return self.model.complete([{"role": "user", "content": prompt}], role="critic").text
