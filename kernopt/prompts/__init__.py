"""Prompt templates (`*.j2`, one per role) and the variables every role shares.

Templates render with StrictUndefined: a variable a template uses but the caller did not pass is an
error at render time, never an empty string in a prompt. `shared(state)` builds the variables every
role gets (task, hardware, history, best); each role adds its own (see the comment at the top of each
template).
"""

from __future__ import annotations

import difflib
import math
import re
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
    env = jinja2.Environment(loader=jinja2.DictLoader(templates), undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True, autoescape=False, keep_trailing_newline=False)
    env.filters["per_call"] = per_call
    return env


def render(name: str, **variables: Any) -> str:
    """Render `prompts/<name>.j2`. Raises jinja2.UndefinedError when a variable it uses is missing."""
    return _env().get_template(f"{name}.j2").render(**variables).strip() + "\n"


def render_bounded(name: str, limit: int, common: dict[str, Any], **variables: Any) -> str:
    """Render `name` with `common` (shared() and the like) and `variables`, at most `limit` characters
    when that can be had by leaving out history lines, oldest first (the best's and the parent's last, since
    the rest of a prompt refers to them by id): the whole prompt is bounded, no text passed between roles
    (ideas, critiques, the source) is cut. A prompt still too long with no history left is returned as it is
    (the model's context limit is the last bound)."""
    history = list(common.get("history", []))
    while True:
        text = render(name, **{**common, "history": history, "shown": [h["id"] for h in history]}, **variables)
        if len(text) <= limit or not history:
            return text
        drop = next((i for i, h in enumerate(history) if not h.get("marks")), 0)
        history = history[:drop] + history[drop + 1:]


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


# A compiler report line (kernopt/evaluators/c_family/optinfo.py) is "line N (<source>): <verdict>". gcc also reports
# every outer loop of a nest and statements that are no loop at all ("not vectorized: multiple nested loops" on an
# outer for, "statement clobbers memory" on an aligned_alloc or an omp region): the relay runs' model never referred
# to those (it used the innermost loops' verdicts and their reasons), so prompts leave them out and say how many.
_REPORT_LINE = re.compile(r"^line \d+ \((?P<src>.*?)\): (?P<verdict>.*)$")
_OUTER = ("multiple nested loops", "loop nest containing two or more consecutive inner loops")


def compiler_report(report: str | None) -> str:
    """The report's lines on loops that can be vectorized (innermost loops, whatever the verdict), the stack
    frames and the evaluator's own "... N more lines"; lines on statements and outer loops are counted, not shown."""
    kept: list[str] = []
    left = 0
    for line in (report or "").splitlines():
        m = _REPORT_LINE.match(line)
        if m is not None and (not re.match(r"\s*(for|while|do)\b", m["src"]) or m["verdict"].startswith(
                tuple(f"not vectorized: {o}" for o in _OUTER))):
            left += 1
            continue
        kept.append(line)
    if left:
        kept.append(f"({left} more line{'s' * (left != 1)} on outer loops and on statements that are not loops left out)")
    return "\n".join(kept)


def per_call(seconds: float) -> str:
    """A time per call in the unit that reads best: "34.1 ms", "812 us", "1.23 s"."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale or unit == "us":
            v = seconds / scale
            return f"{v:.3g} {unit}" if v < 100 else f"{v:.0f} {unit}"
    return f"{seconds:g} s"


def outcome(result: EvalResult | None) -> str:
    """One line: the candidate's own time per call beside its speedup with its interval and verdict ("6.27 ms,
    34.68x [33.1, 35.2] (faster)"), the paired comparison with the best where one ran ("vs best: 0.99x [0.97,
    1.01]"), and the flags; or why it failed. Speedups from separate evaluations each divide by their own baseline
    timing: the time per call and the paired ratio are what compare two candidates."""
    if result is None:
        return "not evaluated"
    flags = list(result.flags)
    t = result.timing
    if result.status == "ok" and t is not None:
        if t.machine_busy:
            verdict = f"machine busy: {len(t.reruns)} round{'s' * (len(t.reruns) != 1)} disturbed, not counted"
            flags = [f for f in flags if f != "machine_busy"]
        else:
            verdict = "faster" if t.significant else "not significantly faster"
            if t.reruns:
                verdict += f"; {len(t.reruns)} disturbed round{'s' * (len(t.reruns) > 1)} re-run"
        text = f"{per_call(t.candidate_median_s)}, {t.speedup:.2f}x [{t.ci_low:.2f}, {t.ci_high:.2f}] ({verdict})"
        vs = result.vs_best  # the paired comparison with the best, where the evaluator ran one
        if vs is not None:
            text += f"; vs best {vs.best_id}: {vs.ratio:.2f}x [{vs.ci_low:.2f}, {vs.ci_high:.2f}]"
    else:
        text = f"{result.status}: {one_line(result.reason, 240)}" if result.reason else result.status
    return text + (f" [flags: {', '.join(flags)}]" if flags else "")


def verdict_words(results: list[EvalResult]) -> list[str]:
    """Every status, race verdict, significance verdict and flag the given results carry, each once, in order."""
    words: dict[str, None] = {}
    for r in results:
        words[r.status] = None
        if r.verification.race_check not in ("not_run",):
            words[r.verification.race_check] = None
        if r.status == "ok" and r.timing is not None:
            words["significant" if r.timing.significant else "not significant"] = None
        words.update(dict.fromkeys(r.flags))
    return list(words)


def legend(results: list[EvalResult], skip: tuple[str, ...] = ()) -> list[str]:
    """"word: what it means" for every status, race verdict, significance verdict and flag that the
    given results carry, each once (kernopt.verdicts), so a prompt explains what it shows; words in `skip`
    are explained where the prompt shows them (the critic's evaluation) and are left out here."""
    from kernopt.verdicts import explained

    return explained([w for w in verdict_words(results) if w not in skip])


def best_so_far(history: list[tuple[Candidate, EvalResult]], gamma: float = 1.0) -> dict[str, Any]:
    """The best-so-far reward of the max-reward formulation, shown to the executor and the planner.

    With gamma = 1 (the default) the best is the search's own (kernopt.agent.search.is_better applied in order:
    verified and significantly faster than the baseline, then, once there is a best, faster than it in the paired
    timing where one ran), so a prompt never names another best than the one the search builds on; the reward is
    ln of its speedup. 0 is the baseline's reward.

    With gamma < 1, t = len(history) and r_i = ln(speedup_i) for the i-th evaluated candidate when it is
    verified and significantly faster (otherwise it does not count):

        B_t = max(0, max_i gamma**(t - 1 - i) * r_i)

    so a best found long ago counts less and a stalled run reads as such.
    """
    from kernopt.agent.search import is_better

    best: dict[str, Any] = {"reward": 0.0, "speedup": 1.0, "id": None, "idea": "the baseline", "gamma": gamma, "time_s": None}
    t = len(history)
    chosen: tuple[Candidate, EvalResult] | None = None
    for i, (cand, res) in enumerate(history):
        if not res.faster or res.speedup is None or res.speedup <= 1.0:
            continue
        if gamma == 1.0:
            if is_better(res, chosen):
                chosen = (cand, res)
            continue
        r = gamma ** (t - 1 - i) * math.log(res.speedup)
        if r > best["reward"]:
            best.update(reward=r, speedup=res.speedup, id=cand.id, idea=cand.idea,
                        time_s=res.timing.candidate_median_s if res.timing is not None else None)
    if chosen is not None:
        cand, res = chosen
        best.update(reward=math.log(res.speedup or 1.0), speedup=res.speedup, id=cand.id, idea=cand.idea,
                    time_s=res.timing.candidate_median_s if res.timing is not None else None)
    best["reward"] = round(best["reward"], 4)
    return best


def first_sentence(text: str, limit: int = 240) -> str:
    """The text's first sentence (up to ". " or the end), on one line, at most `limit` characters."""
    text = flat(text)
    end = text.find(". ")
    head = text if end < 0 else text[: end + 1]
    return one_line(head, limit) + (" [...]" if len(head) < len(text) else "")


def shared(state: SearchState, *, last: int = 8, gamma: float = 1.0, elsewhere: tuple[str, ...] = (),
           critique_below: str | None = None, whole_critiques: int = 1, explained_below: tuple[str, ...] = ()) -> dict[str, Any]:
    """Variables every template gets.

    Each fact once: `history` is the one table of candidates, keyed by id, that the rest of a prompt refers to
    ("c0007, in the candidates above"): an idea's text, an outcome and a critique's diagnosis appear there and
    nowhere else in the prompt; the best so far and the parent are always in it.

    task:     name, target, description, kernel (the editable file), signature, functions, language,
              family ("c" or "torch"), reference (torch family: reference.py's text)
    hardware: C family: target, cores, gpu, compiler, cflags (every object's), ldflags, threads / ranks
              (timing defaults), verify_threads / verify_ranks, fast_math_allowed, timing_size, check_sizes,
              machine (CPU, ISA, caches, measured roofs: lines), tolerance (one line), gates (what is refused: lines);
              torch family: target, cores, gpu, timing_shape, check_shapes, random_vars, tolerances
    history:  the table, oldest first: the last `last` evaluated candidates, and the best and the parent when older,
              less the ids in `elsewhere` (candidates a role's prompt describes in full itself, e.g. the critic's
              candidate): id, parent, idea (whole), author, status, outcome (time per call, speedup with interval,
              paired comparison with the best; or the failure reason; flags), critique (the diagnosis: whole for the
              latest `whole_critiques` critiqued candidates, the first sentence for older ones, "below" for
              `critique_below`, whose critique the prompt shows in full), marks (["best", "parent"] where they apply)
    shown:    the ids in `history`
    legend:   "word: meaning" for each status, race verdict, significance verdict and flag the history
              and the parent's result carry (kernopt.verdicts), less `explained_below` (words the role's own
              section explains where it shows them)
    best:     best_so_far(history, gamma): reward, speedup, time_s (its time per call), id, idea, gamma, and
              where: "table" (its idea is in `history`), "elsewhere" (in the role's own section) or "" (say it here)
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
    best = best_so_far(state.history, gamma)
    recent = {c.id for c, _ in state.history[-last:]} if last > 0 else set()
    keep = recent | {best["id"], state.parent.id}
    rows = [(c, r) for c, r in state.history if c.id in keep and c.id not in elsewhere]
    critiqued = [c.id for c, _ in rows if c.id in state.critiques and c.id != critique_below]
    whole = set(critiqued[-whole_critiques:]) if whole_critiques > 0 else set()
    whole.add(state.parent.id)  # the critique of the kernel being refined, whole wherever it is shown
    history = []
    for cand, res in rows:
        crit = state.critiques.get(cand.id)
        text = ("below" if cand.id == critique_below else flat(crit.diagnosis) if cand.id in whole
                else first_sentence(crit.diagnosis)) if crit else ""
        history.append({"id": cand.id, "parent": "baseline" if cand.parent == state.baseline.id else cand.parent,
                        "idea": flat(cand.idea) or "(no idea given)",
                        "author": cand.author, "status": res.status, "outcome": outcome(res), "critique": text,
                        "marks": [m for m, i in (("best", best["id"]), ("parent", state.parent.id)) if cand.id == i]})
    best["where"] = "table" if best["id"] in {h["id"] for h in history} else "elsewhere" if best["id"] in elsewhere else ""
    parent_result = state.result_of(state.parent.id)
    return {
        "task": {"name": task.name, "target": task.target, "description": task.description.strip(),
                 "kernel": task.kernel, "signature": task.signature, "functions": list(task.functions),
                 "language": task.language, "family": task.family,
                 "reference": task.reference_source() if isinstance(task, TorchTask) else ""},
        "hardware": hardware,
        "history": history,
        "shown": [h["id"] for h in history],
        "best": best,
        "legend": legend([*(r for _, r in rows), *([parent_result] if parent_result is not None else [])], explained_below),
    }
