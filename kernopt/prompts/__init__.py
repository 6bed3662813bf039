"""Prompt templates (`*.j2`, one per role) and the variables every role shares.

Templates render with StrictUndefined: a variable a template uses but the caller did not pass is an
error at render time, never an empty string in a prompt. `shared(state)` builds the variables every
role gets (task, hardware, history, best); each role adds its own (see the comment at the top of each
template).
"""

from __future__ import annotations

import difflib
import math
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernopt.task import TorchTask

if TYPE_CHECKING:
    import jinja2

    from kernopt.agent.base import SearchState
    from kernopt.candidate import Candidate
    from kernopt.evaluators.result import EvalResult

HERE = Path(__file__).resolve().parent


@cache
def _env() -> jinja2.Environment:
    """Every template read once, when the first prompt of the process is rendered: a run keeps the templates
    its code was written for even if the installed files change under it (an upgrade, or an edit in a
    checkout, mid-run; a loader that reads on use crashed a run at its first critique after critic.j2 gained a
    variable)."""
    import jinja2

    templates = {t.name: t.read_text() for t in HERE.glob("*.j2")}
    return jinja2.Environment(loader=jinja2.DictLoader(templates), undefined=jinja2.StrictUndefined,
                              trim_blocks=True, lstrip_blocks=True, autoescape=False, keep_trailing_newline=False)


def render(name: str, **variables: Any) -> str:
    """Render `prompts/<name>.j2`. Raises jinja2.UndefinedError when a variable it uses is missing."""
    return _env().get_template(f"{name}.j2").render(**variables).strip() + "\n"


def render_bounded(name: str, limit: int, common: dict[str, Any], **variables: Any) -> str:
    """Render `name` with `common` (shared() and the like) and `variables`, at most `limit` characters
    when that can be had by leaving out history lines, oldest first: the whole prompt is bounded, no
    text passed between roles (ideas, critiques, the source) is cut. A prompt still too long with no
    history left is returned as it is (the model's context limit is the last bound)."""
    history = list(common.get("history", []))
    while True:
        text = render(name, **{**common, "history": history}, **variables)
        if len(text) <= limit or not history:
            return text
        history = history[1:]


def clip(text: str, limit: int) -> str:
    """At most `limit` characters: the head and the tail, with what was cut said in the middle."""
    text = text.strip()
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    return f"{text[:head]}\n[... {len(text) - limit} characters cut ...]\n{text[-tail:]}"


def flat(text: str) -> str:
    """The text on one line (runs of blanks and line breaks made one space), never cut."""
    return " ".join(text.split())


def one_line(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def diff(old: str, new: str, name: str, max_lines: int = 200) -> str:
    """Unified diff of one file, at most `max_lines` lines ("" when identical)."""
    lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), f"a/{name}", f"b/{name}", lineterm="", n=2))
    if len(lines) > max_lines:
        lines = [*lines[:max_lines], f"[... {len(lines) - max_lines} more diff lines ...]"]
    return "\n".join(lines)


def outcome(result: EvalResult | None) -> str:
    """One line: the speedup with its interval and verdict, or why it failed."""
    if result is None:
        return "not evaluated"
    flags = f" [flags: {', '.join(result.flags)}]" if result.flags else ""
    if result.status == "ok" and result.timing is not None:
        return result.timing.describe() + flags
    return (f"{result.status}: {one_line(result.reason, 240)}" if result.reason else result.status) + flags


def legend(results: list[EvalResult]) -> list[str]:
    """"word: what it means" for every status, race verdict, significance verdict and flag that the
    given results carry, each once (kernopt.verdicts), so a prompt explains what it shows."""
    from kernopt.verdicts import explained

    words: dict[str, None] = {}
    for r in results:
        words[r.status] = None
        if r.verification.race_check not in ("not_run",):
            words[r.verification.race_check] = None
        if r.status == "ok" and r.timing is not None:
            words["significant" if r.timing.significant else "not significant"] = None
        words.update(dict.fromkeys(r.flags))
    return explained(list(words))


def best_so_far(history: list[tuple[Candidate, EvalResult]], gamma: float = 1.0) -> dict[str, Any]:
    """The best-so-far reward of the max-reward formulation, shown to the executor and the planner.

    With t = len(history) and r_i = ln(speedup_i) for the i-th evaluated candidate when it is
    verified and significantly faster (otherwise it does not count):

        B_t = max(0, max_i gamma**(t - 1 - i) * r_i)

    0 is the baseline's reward. gamma = 1 (the default) is the plain best verified log-speedup; gamma < 1
    lets a best found long ago count less, so a stalled run reads as such.
    """
    best: dict[str, Any] = {"reward": 0.0, "speedup": 1.0, "id": None, "idea": "the baseline", "gamma": gamma}
    t = len(history)
    for i, (cand, res) in enumerate(history):
        if not res.faster or res.speedup is None or res.speedup <= 1.0:
            continue
        r = gamma ** (t - 1 - i) * math.log(res.speedup)
        if r > best["reward"]:
            best.update(reward=r, speedup=res.speedup, id=cand.id, idea=cand.idea)
    best["reward"] = round(best["reward"], 4)
    return best


def shared(state: SearchState, *, last: int = 8, gamma: float = 1.0) -> dict[str, Any]:
    """Variables every template gets.

    task:     name, target, description, kernel (the editable file), signature, functions, language,
              family ("c" or "torch"), reference (torch family: reference.py's text)
    hardware: C family: target, cores, gpu, compiler, cflags (every object's), ldflags, threads / ranks
              (timing defaults), verify_threads / verify_ranks, fast_math_allowed, timing_size, check_sizes,
              machine (CPU, ISA, caches, measured roofs: lines), tolerance (one line), gates (what is refused: lines);
              torch family: target, cores, gpu, timing_shape, check_shapes, random_vars, tolerances
    history:  the last `last` evaluated candidates, oldest first: id, parent, idea, author, status,
              outcome (speedup with interval, or the failure reason; flags), critique (a diagnosis or ""),
              ideas and diagnoses whole (see render_bounded for the bound on a whole prompt)
    legend:   "word: meaning" for each status, race verdict, significance verdict and flag the history
              and the parent's result carry (kernopt.verdicts)
    best:     best_so_far(history, gamma): reward, speedup, id, idea, gamma
    """
    task = state.task
    if isinstance(task, TorchTask):
        hardware: dict[str, Any] = {
            "target": task.target, "cores": state.cores, "gpu": True,
            "timing_shape": task.shapes.timing or "reference.py's own values",
            "check_shapes": [dict(s) for s in task.shapes.check], "random_vars": sorted(task.shapes.random),
            "tolerances": {k: f"rtol {t.rtol:g}, atol {t.atol:g}" for k, t in task.verify.tolerances.items()},
            "gates": [],  # the torch family's rules are in the executor's Rules
        }
    else:
        from kernopt.agent.context import gate_lines, machine_lines, tolerance_line

        base_flags = [*task.build.cflags, *(["-fopenmp"] if task.uses_openmp else [])]
        hardware = {
            "target": task.target, "cores": state.cores, "gpu": task.uses_gpu, "compiler": task.compiler, "cflags": base_flags,
            "ldflags": list(task.build.ldflags), "threads": task.timing.threads if task.uses_openmp else None,
            "ranks": task.timing.ranks if task.uses_mpi else None,
            "verify_threads": list(task.verify.threads) if task.uses_openmp else [],
            "verify_ranks": list(task.verify.ranks) if task.uses_mpi else [],
            "fast_math_allowed": task.verify.allow_fast_math, "timing_size": task.sizes.timing,
            "check_sizes": list(task.sizes.check),
            "machine": [] if task.uses_gpu else machine_lines(state.profile, state.cores),
            "tolerance": tolerance_line(task), "gates": gate_lines(task),
        }
    history = []
    shown = [res for _, res in state.history[-last:]] if last > 0 else []
    parent_result = state.result_of(state.parent.id)
    for cand, res in state.history[-last:] if last > 0 else []:
        crit = state.critiques.get(cand.id)
        history.append({"id": cand.id, "parent": cand.parent, "idea": flat(cand.idea) or "(no idea given)",
                        "author": cand.author, "status": res.status, "outcome": outcome(res),
                        "critique": flat(crit.diagnosis) if crit else ""})
    return {
        "task": {"name": task.name, "target": task.target, "description": task.description.strip(),
                 "kernel": task.kernel, "signature": task.signature, "functions": list(task.functions),
                 "language": task.language, "family": task.family,
                 "reference": task.reference_source() if isinstance(task, TorchTask) else ""},
        "hardware": hardware,
        "history": history,
        "best": best_so_far(state.history, gamma),
        "legend": legend([*shown, *([parent_result] if parent_result is not None else [])]),
    }
