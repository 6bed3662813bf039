"""The LLM policy: a planner proposes a ranked list of distinct ideas for the current best kernel, an
executor turns each idea into a complete candidate (the whole kernel file plus optional knobs).

Ideas stack. The planner is told how many candidate evaluations are left and asked for that many
ideas (at most `max_plan`), ordered as a sequence in which each builds on the ones before. The ideas
wait in a queue; each `propose` takes the next ones and executes each against state.parent *at that
moment* (the greedy search asks for one proposal at a time, `sequential`, and moves state.parent to
a new best before asking again), so the second idea is implemented on top of the first when the
first won, and on the same kernel when it lost.

When to plan again (a choice, argued here): the queue is kept after a new best, because the planner
was asked for a sequence that stacks and the executor sees the new best's code, so the next idea is
applied on top of the win as planned; re-planning after every win would cost a planner call per win
and throw away the rest of the sequence. The queue is re-planned when it is empty, and dropped (each
idea logged) when the search asks for proposals for a candidate that is neither the plan's parent
nor one of the candidates built from the plan (beam, tree and evolve searches hop between nodes; the
plan assumed another kernel). At most one plan per `propose`: a plan whose ideas all fail to
execute ends that step with what was made.

Per `propose`: critique the parent's and the latest results that have no critique yet, plan if the
queue is empty, then execute queued ideas in order until n new candidates exist. An answer that
cannot be used (no code, truncated, the wrong file, unchanged, refused by the static gate) is sent
back to the model once with the reason; a second failure gives the idea up ("proposal_failed" in the
run log). Every idea that is dropped unexecuted (already tried, beyond what was asked, a plan for
another parent, the run ended) leaves an "idea_dropped" event with the reason. Model budget and
endpoint errors propagate: the search stops cleanly on ModelBudgetExhausted, and ModelError is an
infrastructure failure.

Resume: a resumed run replays the same calls in the same order (the budget left is part of the
planner prompt, and it is the same on replay), so every answer comes from the request cache. A
resume that extends the budget changes that number, so its first planner prompt differs and is
asked anew.

With `tune=True` (hybrid), the offline tuner's moves (threads, schedule, flags, binding) applied to
the best evaluated LLM candidate fill part of each batch: the model proposes structure, the tuner
tunes parameters. A hybrid policy is not sequential (the tuner's share needs a batch).
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from kernopt.agent.base import Critic, Critique, SearchState
from kernopt.agent.extract import extract_code, extract_json
from kernopt.candidate import Candidate
from kernopt.evaluators import static_check
from kernopt.evaluators.c_family.static_gate import check_source
from kernopt.model import Completion, Message, Model
from kernopt.prompts import compiler_report, flat, one_line, outcome, render, render_bounded, shared
from kernopt.task import AnyTask as Task
from kernopt.task import Task as CTask

KINDS = ("parallelization", "vectorization", "tiling", "memory", "communication", "algorithm", "flags", "knobs", "other")
# Extra compiler flags offered to the executor; only those the static gate accepts for the task are shown.
FLAG_MENU = ("-O2", "-O3", "-march=native", "-mtune=native", "-funroll-loops", "-fprefetch-loop-arrays", "-fipa-pta",
             "-floop-interchange", "-floop-unroll-and-jam", "-fvect-cost-model=unlimited", "-mprefer-vector-width=256",
             "-mprefer-vector-width=512", "-mavx2", "-mfma", "-ffast-math", "-ffp-contract=fast", "-fopenmp-simd",
             "-floop-nest-optimize")
KNOB_KEYS = ("threads", "ranks", "bind", "cflags", "defines")
T = TypeVar("T")


class Idea(BaseModel):
    """One planned optimization."""

    model_config = ConfigDict(extra="forbid")

    idea: str
    rationale: str = ""
    kind: str = "other"


def norm(text: str) -> str:
    """Ideas compare case- and whitespace-insensitively."""
    return " ".join(text.lower().split()).rstrip(".")


def kinds_for(task: Task) -> list[str]:
    drop = set()
    if not task.uses_mpi:
        drop.add("communication")
    if not (task.uses_mpi or task.uses_openmp or task.uses_gpu):
        drop.add("parallelization")
    if task.uses_gpu:
        drop.add("flags")
    return [k for k in KINDS if k not in drop]


def parse_plan(text: str, avoid: set[str], kinds: list[str]) -> tuple[list[Idea], list[str], str]:
    """The planner's answer -> (new ideas in rank order, ideas dropped as already tried, reason when
    there are no new ideas). Accepts {"ideas": [...]} fenced or bare, items as objects or strings.
    Ideas and rationales are kept whole (only surrounding blanks stripped): they go to the executor."""
    data, reason = extract_json(text, keys=("ideas",))
    if data is None:
        return [], [], reason
    items = data["ideas"] if isinstance(data["ideas"], list) else []
    ideas: list[Idea] = []
    dropped: list[str] = []
    taken = set(avoid)
    for item in items:
        if isinstance(item, str):
            item = {"idea": item}
        if not isinstance(item, dict) or not isinstance(item.get("idea"), str) or not item["idea"].strip():
            continue
        text_ = item["idea"].strip()
        if norm(text_) in taken:
            dropped.append(text_)
            continue
        taken.add(norm(text_))
        kind = str(item.get("kind") or "other").strip().lower()
        rationale = item.get("rationale")
        ideas.append(Idea(idea=text_, rationale=rationale.strip() if isinstance(rationale, str) else "",
                          kind=kind if kind in kinds else "other"))
    if not ideas:
        reason = ("every idea was already tried; propose different ones" if dropped
                  else 'the JSON object has no usable "ideas" (a list of {"idea", "rationale", "kind"})')
    return ideas, dropped, "" if ideas else reason


def flag_allowed(task: Task, flag: str) -> bool:
    """Whether the evaluator's static gate accepts `flag` as a candidate's extra compiler flag."""
    return isinstance(task, CTask) and check_source(task, Candidate(files={task.kernel: ""}, cflags=[flag])) is None


def allowed_knobs(task: Task, cores: int) -> dict[str, Any]:
    """The knob values the executor may set for this task (what the evaluator understands)."""
    defines = {t.name: [str(v) for v in t.values] for t in task.tunables}
    if task.uses_gpu or not isinstance(task, CTask):  # GPU targets: only the tunables (block sizes, warps, stages, launch macros)
        return {"cflags": [], "threads": [], "ranks": [], "bind": [], "defines": defines}
    counts = list(range(1, max(cores, 1) + 1))
    bind = [*(["close", "spread"] if task.uses_openmp else []), *(["core", "none"] if task.uses_mpi else [])]
    return {"cflags": [f for f in FLAG_MENU if flag_allowed(task, f)],
            "threads": sorted({*counts, task.timing.threads}) if task.uses_openmp else [],
            "ranks": sorted({*counts, task.timing.ranks}) if task.uses_mpi else [],
            "bind": bind, "defines": defines}


def apply_knobs(task: Task, raw: dict[str, Any], allowed: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Candidate field updates from the executor's knob JSON, and what was dropped as not allowed.
    Keys left out keep the parent's values; null resets threads/ranks/bind to the task default."""
    if isinstance(raw.get("knobs"), dict):
        raw = raw["knobs"]
    updates: dict[str, Any] = {}
    dropped: list[str] = []
    for key in ("threads", "ranks"):
        if key in raw:
            v = raw[key]
            if v is None or (isinstance(v, int) and not isinstance(v, bool) and v in allowed[key]):
                updates[key] = v
            else:
                dropped.append(f"{key}={v!r}")
    if "bind" in raw:
        if raw["bind"] is None or raw["bind"] in allowed["bind"]:
            updates["bind"] = raw["bind"]
        else:
            dropped.append(f"bind={raw['bind']!r}")
    if "cflags" in raw:
        flags = raw["cflags"] or []
        if isinstance(flags, str):
            try:
                flags = shlex.split(flags)
            except ValueError:  # an unbalanced quote: the model's flags are unusable, not the run
                dropped.append(f"cflags {flags!r}")
                flags = []
        flags = flags if isinstance(flags, list) else [flags]
        kept: list[str] = []
        for f in flags:
            if isinstance(f, str) and flag_allowed(task, f):
                if f not in kept:
                    kept.append(f)
            else:
                dropped.append(f"cflag {f!r}")
        updates["cflags"] = kept
    if isinstance(raw.get("defines"), dict):
        defines: dict[str, str] = {}
        for name, value in raw["defines"].items():
            if str(value) in allowed["defines"].get(name, []):
                defines[name] = str(value)
            else:
                dropped.append(f"define {name}={value!r}")
        updates["defines"] = defines
    return updates, dropped


class LLMPolicy:
    """Planner + executor over one model. See the module docstring."""

    def __init__(self, model: Model, critic: Critic | None = None, name: str = "llm", *, tune: bool = False,
                 tune_k: int = 2, history: int = 8, gamma: float = 1.0, extra_ideas: int = 2, critique_recent: int = 2,
                 max_plan: int = 12, prompt_chars: int = 60_000, revise_every: int = 3) -> None:
        self.model = model
        self.critic = critic
        self.name = name
        self.author = "llm"
        self.tune = tune
        self.tune_k = tune_k  # at most this many tuner variants per batch (and at most half of it)
        self.history = history  # recent candidates shown in prompts
        self.gamma = gamma  # discount of the best-so-far reward (prompts.best_so_far)
        self.extra_ideas = extra_ideas  # ideas planned beyond n, for those that fail to execute
        self.critique_recent = critique_recent  # uncritiqued recent results critiqued per step (besides the parent)
        self.max_plan = max_plan  # ideas asked of one plan at most (the budget left, up to this)
        self.prompt_chars = prompt_chars  # a prompt longer than this loses its oldest history lines first
        # After this many ideas of one plan were executed, the rest is planned again with the results and critiques
        # since (the planner sees its pending ideas and may keep, reorder or replace them): a real model's critic kept
        # suggesting a change that a fixed plan of 12 never scheduled (gemm, 2026-11-25). 0: never.
        self.revise_every = revise_every
        self._executed = 0  # ideas of the current plan executed so far
        self.sequential = not tune  # the greedy search evaluates each proposal before asking for the next
        self._given_up: set[str] = set()
        self._queue: list[Idea] = []  # planned ideas not executed yet, in order
        self._plan_for: set[str] = set()  # the plan's parent and the candidates built from it

    # ------------------------------------------------------------------ propose
    def propose(self, state: SearchState, n: int) -> list[Candidate]:
        if n <= 0:
            return []
        self.critique_new(state)
        tune_from = self.tunable(state) if self.tune else None
        t = min(self.tune_k, n // 2) if tune_from is not None else 0
        seen = state.seen | {state.parent.id}
        out: list[Candidate] = []
        if self._queue and state.parent.id not in self._plan_for:
            self.drop_queue(state, f"the search moved to candidate {state.parent.id}, which this plan was not made for")
        pending: list[Idea] = []
        if self._queue and self.revise_every and self._executed >= self.revise_every:
            pending = list(self._queue)
            self.drop_queue(state, f"revised: the plan is made again after {self._executed} of its ideas were measured")
        planned = False
        while len(out) < n - t:
            if not self._queue:
                if planned:
                    break
                planned = True
                self._queue = self.plan(state, self.plan_size(state, n - t), pending=pending)
                self._plan_for = {state.parent.id}
                self._executed = 0
                if not self._queue:
                    break
            idea = self._queue.pop(0)
            self._executed += 1
            cand = self.execute(state, idea, seen)
            if cand is not None:
                seen.add(cand.id)
                self._plan_for.add(cand.id)
                out.append(cand)
        if tune_from is not None and len(out) < n:
            for cand in hybrid(state, tune_from, n - len(out)):
                if cand.id not in seen:
                    seen.add(cand.id)
                    out.append(cand)
        return out

    def plan_size(self, state: SearchState, n: int) -> int:
        """How many ideas to ask for: the candidates left in the run (a sequence that may fill it), at
        most max_plan, at least the n wanted now; without a known budget, n plus extra_ideas."""
        if state.budget_left is None:
            return n + self.extra_ideas
        return max(n, min(self.max_plan, state.budget_left))

    def drop_queue(self, state: SearchState, reason: str) -> None:
        """Forget the queued ideas, each logged as an "idea_dropped" event with the reason."""
        for idea in self._queue:
            state.log("idea_dropped", idea=idea.idea, kind=idea.kind, reason=reason)
        self._queue = []
        self._plan_for = set()

    def finish(self, state: SearchState, reason: str) -> None:
        """The search ended: the ideas still queued are logged as dropped, with why it ended."""
        self.drop_queue(state, f"not executed: {reason}")

    def critique_new(self, state: SearchState) -> None:
        """Critique the parent's result and the latest results that have none yet (into state.critiques)."""
        if self.critic is None:
            return
        todo: list[Candidate] = []
        if state.result_of(state.parent.id) is not None and state.parent.id not in state.critiques:
            todo.append(state.parent)
        recent = [c for c, _ in reversed(state.history) if c.id not in state.critiques and c.id != state.parent.id]
        todo += recent[: self.critique_recent]
        for cand in todo:
            result = state.result_of(cand.id)
            if result is not None:
                state.critiques[cand.id] = self.critic.critique(state, cand, result)

    def tunable(self, state: SearchState) -> Candidate | None:
        """The best evaluated candidate of this policy that verified (the hybrid's starting point)."""
        mine = [(c, r) for c, r in state.history if c.author == self.author and r.status == "ok" and r.speedup is not None]
        if not mine:
            return None
        return max(mine, key=lambda cr: (cr[1].faster, cr[1].speedup or 0.0))[0]

    # ------------------------------------------------------------------ shared prompt parts
    def _latest_critique(self, state: SearchState) -> Critique | None:
        if state.parent.id in state.critiques:
            return state.critiques[state.parent.id]
        for c, _ in reversed(state.history):
            if c.id in state.critiques:
                return state.critiques[c.id]
        return None

    def _vars(self, state: SearchState, critique: Critique | None = None) -> dict[str, Any]:
        """shared() and the parent; `critique`: the one the prompt shows in full (the table then refers to it)."""
        parent = state.parent
        result = state.result_of(parent.id)
        below = critique.candidate_id if critique is not None else None
        return {**shared(state, last=self.history, gamma=self.gamma, critique_below=below), "code": parent.files.get(state.task.kernel, ""),
                "parent": {"id": parent.id, "idea": parent.idea.strip() or "(no idea given)", "knobs": parent.knobs(),
                           "outcome": outcome(result) if result else
                           ("the baseline (speedup 1.00 by definition)" if parent.id == state.baseline.id else "not evaluated"),
                           # gcc's vectorization and stack report on the parent (evaluator-made, capped; "" where none)
                           "report": compiler_report(result.compiler_report if result else
                                                     state.baseline_report if parent.id == state.baseline.id else None)}}

    def render_bounded(self, name: str, common: dict[str, Any], **variables: Any) -> str:
        """Render a role's prompt within `prompt_chars`: texts passed between roles (ideas, critiques,
        the source) are never cut; the oldest history lines go first until the prompt fits."""
        return render_bounded(name, self.prompt_chars, common, **variables)

    def _converse(self, prompt: str, role: str, expected: str,
                  parse: Callable[[Completion], tuple[T | None, str]]) -> tuple[T | None, str, int]:
        """Ask; if the answer cannot be used, send the reason back in the same conversation once.
        Returns (value, "", attempts) or (None, the last reason, attempts)."""
        messages: list[Message] = [{"role": "user", "content": prompt}]
        reason = ""
        for attempt in (1, 2):
            answer = self.model.complete(messages, role=role)
            try:
                value, reason = parse(answer)
            except Exception as e:  # noqa: BLE001 - an answer is untrusted input: whatever breaks the parser is an unusable answer
                value, reason = None, f"the answer could not be read ({type(e).__name__}); answer in the format asked for"
            if value is not None:
                return value, "", attempt
            messages = [*messages, {"role": "assistant", "content": answer.text},
                        {"role": "user", "content": render("retry", reason=reason, expected=expected)}]
        return None, reason, 2

    # ------------------------------------------------------------------ planner
    def tried(self, state: SearchState) -> list[str]:
        """Ideas not to propose again: every evaluated candidate's, and those given up on."""
        out: dict[str, str] = {}
        for c, _ in state.history:
            if c.idea.strip():
                out.setdefault(norm(c.idea), c.idea.strip())
        for idea in sorted(self._given_up):
            out.setdefault(idea, idea)
        return list(out.values())

    def plan(self, state: SearchState, k: int, pending: list[Idea] | None = None) -> list[Idea]:
        """Up to k new ideas, most promising first. One retry on an unusable answer; then the latest
        critique's suggestions (not yet tried) stand in. `pending`: the previous plan's ideas not executed
        yet, shown to the planner to keep, reorder or replace (a revision)."""
        avoid = self.tried(state)
        avoid_norm = {norm(a) for a in avoid}
        kinds = kinds_for(state.task)
        critique = self._latest_critique(state)
        # every tried idea, on one line as the table writes it: the template lists those the table does not show
        prompt = self.render_bounded("planner", self._vars(state, critique), critique=critique.model_dump() if critique else None,
                                     avoid=[flat(a) for a in avoid], kinds=kinds, max_ideas=k, budget_left=state.budget_left,
                                     stacking=self.sequential, allowed=allowed_knobs(state.task, state.cores),
                                     pending=[i.model_dump() for i in pending or []])
        dropped: list[str] = []

        def parse(answer: Completion) -> tuple[list[Idea] | None, str]:
            ideas, dropped_now, reason = parse_plan(answer.text, avoid_norm, kinds)
            dropped.extend(dropped_now)
            if not ideas and answer.finish_reason == "length":
                reason = f"the answer was cut off ({reason}); keep it short"
            return ideas or None, reason

        expected = f'one JSON object {{"ideas": [{{"idea": ..., "rationale": ..., "kind": ...}}]}} with up to {k} new ideas, and nothing else'
        got, reason, _ = self._converse(prompt, "planner", expected, parse)
        ideas = got or []
        source = "planner"
        if not ideas and critique is not None:
            ideas = [Idea(idea=i.strip(), rationale="suggested by the critique", kind="other")
                     for i in dict.fromkeys(critique.next_ideas) if norm(i) not in avoid_norm]
            source = "critique"
        state.log("plan", parent=state.parent.id, source=source, ideas=[i.model_dump() for i in ideas[:k]],
                  dropped=dropped, reason=reason if not ideas else "", asked=k, budget_left=state.budget_left,
                  revision=bool(pending))
        for text in dropped:
            state.log("idea_dropped", idea=text, kind="", reason="already tried in this run")
        for idea in ideas[k:]:
            state.log("idea_dropped", idea=idea.idea, kind=idea.kind, reason=f"beyond the {k} ideas asked for")
        return ideas[:k]

    # ------------------------------------------------------------------ executor
    def execute(self, state: SearchState, idea: Idea, seen: set[str]) -> Candidate | None:
        """One idea -> one new candidate derived from state.parent, or None (logged) after one retry."""
        task = state.task
        allowed = allowed_knobs(task, state.cores)
        critique = state.critiques.get(state.parent.id)
        prompt = self.render_bounded("executor", self._vars(state, critique), critique=critique.model_dump() if critique else None,
                                     idea=idea.model_dump(), allowed=allowed)
        expected = (f"the complete {task.kernel} in one fenced block (```{task.language} {task.kernel}), then, only "
                    f"if knobs change, one ```json block of knobs")
        dropped: list[str] = []

        def parse(answer: Completion) -> tuple[Candidate | None, str]:
            cand, reason, dropped_now = self.candidate(state, idea, answer, allowed, seen)
            dropped[:] = dropped_now  # the knobs dropped from the answer that counts
            return cand, reason

        cand, reason, attempts = self._converse(prompt, "executor", expected, parse)
        if cand is not None:
            state.log("proposal", candidate_id=cand.id, parent=cand.parent, idea=idea.idea, kind=idea.kind,
                      attempts=attempts, knobs_dropped=dropped)
            return cand
        state.log("proposal_failed", idea=idea.idea, reason=reason)
        state.log("idea_dropped", idea=idea.idea, kind=idea.kind, reason=f"the executor's answers could not be used: {reason}")
        self._given_up.add(norm(idea.idea))
        return None

    def candidate(self, state: SearchState, idea: Idea, answer: Completion, allowed: dict[str, Any],
                  seen: set[str]) -> tuple[Candidate | None, str, list[str]]:
        """The executor's answer -> (candidate, "", dropped knobs) or (None, why not, dropped knobs)."""
        task, parent = state.task, state.parent
        got = extract_code(answer.text, task.kernel, task.functions, truncated=answer.finish_reason == "length")
        raw, _ = extract_json(answer.text, keys=(*KNOB_KEYS, "knobs"))
        updates, dropped = apply_knobs(task, raw, allowed) if raw is not None else ({}, [])
        code = got.code
        if code is None and updates and got.problem == "no_code":
            code = parent.files.get(task.kernel, "")  # a knobs-only answer: the parent's code with new knobs
        if code is None:
            return None, got.reason, dropped
        try:
            cand = Candidate.model_validate({**parent.model_dump(), **updates, "files": {**parent.files, task.kernel: code},
                                             "parent": parent.id, "idea": idea.idea, "author": self.author})
        except ValidationError as e:
            return None, f"the knobs are not valid: {one_line(str(e), 200)}", dropped
        if cand.id == parent.id:
            return None, f"the answer is identical to the parent (same {task.kernel} and knobs): nothing was changed", dropped
        if cand.id in seen:
            prior = state.result_of(cand.id)
            was = f" and evaluated ({outcome(prior)})" if prior else ""
            return None, f"this exact candidate ({cand.id}) was already proposed{was}; make a different change", dropped
        gate = static_check(task, cand)
        if gate is not None:
            return None, f"the static gate would reject it: {gate}", dropped
        return cand, "", dropped


def hybrid(state: SearchState, candidate: Candidate, k: int) -> list[Candidate]:
    """The offline tuner's top k moves (threads, schedule and clause edits, flags, binding, tunables)
    applied to `candidate`, as the tuner would for a parent; ids already evaluated are skipped."""
    from kernopt.tuner.policy import TunerPolicy

    return TunerPolicy().propose(dataclasses.replace(state, parent=candidate), k)
