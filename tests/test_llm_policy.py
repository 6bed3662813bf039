"""The LLM policy (kernopt.agent.llm), its critic (kernopt.agent.critic), answer extraction
(kernopt.agent.extract) and the prompt templates (kernopt.prompts), driven by an in-process fake model."""

from __future__ import annotations

import math
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jinja2
import pytest

from kernopt.agent.base import Critique, SearchState
from kernopt.agent.critic import LLMCritic
from kernopt.agent.extract import extract_code, extract_json
from kernopt.agent.llm import Idea, LLMPolicy, allowed_knobs, parse_plan
from kernopt.agent.search import Hooks
from kernopt.candidate import Candidate
from kernopt.evaluators.c_family.static_gate import check_source
from kernopt.evaluators.result import EvalResult, PairedComparison, TimingStats, Verification
from kernopt.model import Completion, Message, ModelBudgetExhausted, ModelError, Spend
from kernopt.prompts import best_so_far, render
from kernopt.task import Task, load_task

SMALL_GEMM = Path(__file__).resolve().parent / "data" / "small_gemm"
HEADERS = Path(__file__).resolve().parents[1] / "kernopt" / "evaluators" / "c_family" / "c"

Answer = str | Completion | Exception | Callable[[list[Message]], str]


class FakeModel:
    """Answers each role from its own script, in order (the last answer repeats); records every call.
    An answer may be text, a Completion, an exception to raise, or a function of the messages."""

    name = "fake"

    def __init__(self, **script: list[Answer]) -> None:
        self.script = {role: list(answers) for role, answers in script.items()}
        self.calls: list[tuple[str, list[Message]]] = []
        self.spend = Spend()

    def complete(self, messages: list[Message], *, role: str, **opts: Any) -> Completion:
        self.calls.append((role, [dict(m) for m in messages]))
        queue = self.script.get(role)
        assert queue, f"unexpected {role} call"
        item = queue.pop(0) if len(queue) > 1 else queue[0]
        if isinstance(item, Exception):
            raise item
        if callable(item):
            item = item(messages)
        return item if isinstance(item, Completion) else Completion(text=item, model=self.name, finish_reason="stop")

    def roles(self) -> list[str]:
        return [r for r, _ in self.calls]


class Events:
    """A SearchState log sink that keeps the events."""

    def __init__(self) -> None:
        self.items: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, event: str, **fields: Any) -> None:
        self.items.append((event, fields))

    def of(self, event: str) -> list[dict[str, Any]]:
        return [f for e, f in self.items if e == event]


# ---------------------------------------------------------------------------------------- kernels
PARALLEL = """#include <stddef.h>
/* C = A * B, rows split across threads. */
void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    #pragma omp parallel for
    for (long i = 0; i < n; i++) {
        for (long j = 0; j < n; j++) {
            double s = 0.0;
            for (long k = 0; k < n; k++) {
                s += a[i * n + k] * b[k * n + j];
            }
            c[i * n + j] = s;
        }
    }
}
"""

INTERCHANGE = """/* i-k-j order: the inner loop streams rows of b and c. */
void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    #pragma omp parallel for
    for (long i = 0; i < n; i++) {
        for (long j = 0; j < n; j++) c[i * n + j] = 0.0;
        for (long k = 0; k < n; k++) {
            const double aik = a[i * n + k];
            for (long j = 0; j < n; j++) {
                c[i * n + j] += aik * b[k * n + j];
            }
        }
    }
}
"""

TILED = """static long min_l(long x, long y) { return x < y ? x : y; }

void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    const long T = 32;
    #pragma omp parallel for
    for (long ii = 0; ii < n; ii += T) {
        for (long i = ii; i < min_l(ii + T, n); i++)
            for (long j = 0; j < n; j++) c[i * n + j] = 0.0;
        for (long kk = 0; kk < n; kk += T)
            for (long i = ii; i < min_l(ii + T, n); i++)
                for (long k = kk; k < min_l(kk + T, n); k++) {
                    const double aik = a[i * n + k];
                    for (long j = 0; j < n; j++) c[i * n + j] += aik * b[k * n + j];
                }
    }
}
"""

PLAN = """Here is my plan.
```json
{"ideas": [
  {"idea": "Parallelize the i loop with OpenMP", "rationale": "rows are independent", "kind": "parallelization"},
  {"idea": "Interchange the j and k loops (i-k-j order)", "rationale": "unit stride on b", "kind": "Memory"},
  {"idea": "Tile i and k by 32", "rationale": "cache reuse", "kind": "tiling"},
  {"idea": "parallelize the I loop with openmp.", "rationale": "duplicate", "kind": "parallelization"}
]}
```
The first one is the safest."""

BY_IDEA = {"parallelize": PARALLEL, "interchange": INTERCHANGE, "tile": TILED}


def executor_answer(messages: list[Message]) -> str:
    """Writes the kernel that matches the idea in the executor prompt, with prose around it."""
    idea = re.search(r"## The idea to implement \(\w+\)\n(.*)", messages[0]["content"])
    assert idea, "the executor prompt names the idea"
    code = next(k for key, k in BY_IDEA.items() if key in idea.group(1).lower())
    return f"Sure. Implementing: {idea.group(1)}\n\n```c kernel.c\n{code}```\n\nThis should help because of locality."


@pytest.fixture(scope="module")
def task() -> Task:
    return load_task(SMALL_GEMM)


def state_for(task: Task, history: list[tuple[Candidate, EvalResult]] | None = None, parent: Candidate | None = None,
              cores: int = 2) -> tuple[SearchState, Events]:
    base = Candidate(files={task.kernel: task.baseline_source()}, author="baseline", idea="the task's own kernel")
    events = Events()
    return SearchState(task=task, baseline=base, parent=parent or base, history=history or [], cores=cores, log=events), events


def ok_result(cand: Candidate, speedup: float, significant: bool = True) -> EvalResult:
    lo = speedup * 0.9 if significant else 0.9
    timing = TimingStats(baseline_s=[1.0] * 5, candidate_s=[1 / speedup] * 5, baseline_median_s=1.0,
                         candidate_median_s=1 / speedup, speedup=speedup, ci_low=lo, ci_high=speedup * 1.1,
                         p_value=0.001 if significant else 0.4, paired_low=lo, threads=2)
    return EvalResult(candidate_id=cand.id, status="ok", reason=f"verified; {speedup:.2f}x", timing=timing,
                      verification=Verification(sizes=[1, 7, 33, 64, 71], seeds=5, threads=[1, 2, 3, 4], race_check="clean"),
                      phase_s={"build": 0.2, "verify": 0.8, "race": 1.1, "time": 2.0})


def derived(state: SearchState, code: str, idea: str, **knobs: Any) -> Candidate:
    return Candidate(files={state.task.kernel: code}, parent=state.baseline.id, idea=idea, author="llm", **knobs)


# ---------------------------------------------------------------------------------------- extraction
K = PARALLEL


@pytest.mark.parametrize("answer", [
    pytest.param(f"Here is the faster version:\n```c\n{K}```\nIt parallelizes the outer loop.", id="prose-around-fence"),
    pytest.param(f"```\n{K}```", id="no-language-tag"),
    pytest.param(f"~~~c\n{K}~~~\n", id="tilde-fence"),
    pytest.param(f"```c\n// file: kernel.c\n{K}```", id="filename-comment"),
    pytest.param(f"**kernel.c**\n```c\n{K}```", id="filename-heading"),
    pytest.param(f"Here is the new kernel.c:\n```cpp\n{K}```", id="filename-in-prose"),
    pytest.param(f'```c title="kernel.c"\n{K}```', id="filename-title"),
    pytest.param(f"```kernel.c\n{K}```", id="filename-as-info"),
    pytest.param(K, id="bare-code"),
    pytest.param(f"The key line:\n```c\n#pragma omp parallel for\n```\nThe whole file:\n```c\n{K}```", id="snippet-then-file"),
])
def test_extract_code_accepts(answer: str) -> None:
    got = extract_code(answer, "kernel.c", ["gemm"])
    assert got.ok and got.code is not None, got.reason
    assert "void gemm(long n" in got.code and got.code.count("{") == got.code.count("}")


def test_extract_code_picks_the_editable_file_among_several() -> None:
    harness = "int main(void) { return 0; }\n"
    answer = (f"I also changed the harness.\n\n```c harness.c\n{harness}```\n\n```c kernel.c\n{K}```\n"
              f"```h\n// file: helpers.h\nstatic int x;\n```")
    got = extract_code(answer, "kernel.c", ["gemm"])
    assert got.ok and got.code == K
    assert got.ignored == ["harness.c", "helpers.h"]
    # the editable file written twice: the last version wins
    got = extract_code(f"```c kernel.c\n{TILED}```\nBetter:\n```c kernel.c\n{K}```", "kernel.c", ["gemm"])
    assert got.code == K


@pytest.mark.parametrize("answer, finish, problem, words", [
    pytest.param("", "stop", "empty", "empty", id="empty"),
    pytest.param("   \n", "stop", "empty", "empty", id="blank"),
    pytest.param("I would tile the loops and use OpenMP.", "stop", "no_code", "no code block", id="prose-only"),
    pytest.param(f"```c\n{K[:120]}", "length", "truncated", "cut off", id="truncated-length"),
    pytest.param(f"Here:\n```c\n{K[:120]}", "stop", "truncated", "cut off", id="unterminated-fence"),
    pytest.param(f"```c harness.c\n{K}```", "stop", "wrong_file", "harness.c but not kernel.c", id="only-another-file"),
    pytest.param("```diff\n-    for (long i\n+    #pragma omp parallel for\n```", "stop", "diff", "diff", id="a-diff"),
    pytest.param("```c\nvoid other(void) { }\n```", "stop", "invalid", "gemm()", id="missing-function"),
    pytest.param(f"```c kernel.c\n{K}}}\n```", "stop", "invalid", "'{'", id="unbalanced-braces"),
    pytest.param(f"The kernel:\n```c\n{K}```\nAnd now a better one:\n```c kernel.c\n{K[:200]}", "length", "truncated",
                 "cut off", id="cut-while-writing-a-later-version"),
])
def test_extract_code_failures_have_reasons(answer: str, finish: str, problem: str, words: str) -> None:
    got = extract_code(answer, "kernel.c", ["gemm"], truncated=finish == "length")
    assert not got.ok and got.code is None
    assert got.problem == problem
    assert words in got.reason and "kernel.c" in got.reason  # the reason says what to send instead


def test_extract_code_complete_block_before_the_cut_is_kept() -> None:
    got = extract_code(f"```c kernel.c\n{K}```\nThis works because the rows are indep", "kernel.c", ["gemm"], truncated=True)
    assert got.ok and got.code == K


def test_extract_code_never_raises_on_odd_input() -> None:
    for text in (None, "```", "``````", "```c\n```", "{", "}}}}", "```json\n{\"a\": 1}\n```", "\x00\x01", "~~~\n" * 5):
        got = extract_code(text, "kernel.c", ["gemm"])
        assert not got.ok and got.reason


def test_extract_json_variants() -> None:
    fenced = 'Plan:\n```json\n{"ideas": [{"idea": "a"}]}\n```\nHope this helps!'
    assert extract_json(fenced, ["ideas"]) == ({"ideas": [{"idea": "a"}]}, "")
    assert extract_json('Sure {"ideas": ["x"]} -- done.', ["ideas"])[0] == {"ideas": ["x"]}
    assert extract_json('```\n{"ideas": ["x",],}\n```', ["ideas"])[0] == {"ideas": ["x"]}  # trailing commas
    # the object with the key wins over an earlier one without it
    assert extract_json('{"note": 1} then {"diagnosis": "d"}', ["diagnosis"])[0] == {"diagnosis": "d"}
    value, reason = extract_json('```json\n{"ideas": [{"idea": "a"', ["ideas"])
    assert value is None and "cut off" in reason
    value, reason = extract_json("no json here", ["ideas"])
    assert value is None and "no JSON object" in reason


# ---------------------------------------------------------------------------------------- planner
def test_parse_plan_ranks_normalizes_and_drops_tried() -> None:
    kinds = ["parallelization", "memory", "tiling", "other"]
    ideas, dropped, reason = parse_plan(PLAN, {"tile i and k by 32"}, kinds)
    assert [i.idea for i in ideas] == ["Parallelize the i loop with OpenMP", "Interchange the j and k loops (i-k-j order)"]
    assert ideas[1].kind == "memory" and ideas[0].rationale == "rows are independent"
    assert dropped == ["Tile i and k by 32", "parallelize the I loop with openmp."]  # tried; repeated within the plan
    assert reason == ""
    ideas, _, _ = parse_plan('{"ideas": ["Unroll k by 4", {"idea": "x", "kind": "quantum"}, {"nope": 1}]}', set(), kinds)
    assert [(i.idea, i.kind) for i in ideas] == [("Unroll k by 4", "other"), ("x", "other")]
    ideas, dropped, reason = parse_plan(PLAN, {"parallelize the i loop with openmp", "interchange the j and k loops (i-k-j order)",
                                               "tile i and k by 32"}, kinds)
    assert ideas == [] and "already tried" in reason
    assert parse_plan("I suggest tiling.", set(), kinds)[2].startswith("the answer contains no JSON object")


def test_planner_drops_ideas_already_in_history_and_retries_an_unusable_answer(task: Task) -> None:
    state, events = state_for(task)
    done = derived(state, PARALLEL, "parallelize the i loop with OpenMP")
    state.history.append((done, ok_result(done, 1.8)))
    model = FakeModel(planner=["Let me think... tiling is good.", PLAN])
    ideas = LLMPolicy(model).plan(state, 5)
    assert [i.idea for i in ideas] == ["Interchange the j and k loops (i-k-j order)", "Tile i and k by 32"]
    assert model.roles() == ["planner", "planner"]
    retry = model.calls[1][1]
    assert [m["role"] for m in retry] == ["user", "assistant", "user"]
    assert "no JSON object" in retry[2]["content"] and '"ideas"' in retry[2]["content"]
    assert "parallelize the i loop with OpenMP" in retry[0]["content"]  # tried ideas are listed in the prompt
    (plan,) = events.of("plan")
    assert plan["source"] == "planner" and len(plan["ideas"]) == 2 and len(plan["dropped"]) == 2


def test_planner_falls_back_to_the_critique_suggestions(task: Task) -> None:
    state, events = state_for(task)
    bad = derived(state, PARALLEL.replace("s = 0.0;", "s = 0.0"), "parallelize")
    state.history.append((bad, EvalResult(candidate_id=bad.id, status="compile_error", reason="kernel.c:6: expected ';'")))
    state.critiques[bad.id] = Critique(candidate_id=bad.id, status="compile_error", diagnosis="missing ';'",
                                       next_ideas=["parallelize", "add the missing semicolon"])
    ideas = LLMPolicy(FakeModel(planner=["no idea"])).plan(state, 3)
    assert [i.idea for i in ideas] == ["add the missing semicolon"]  # "parallelize" was tried
    assert events.of("plan")[0]["source"] == "critique"


# ---------------------------------------------------------------------------------------- executor
def test_executor_retries_once_with_the_reason_then_succeeds(task: Task) -> None:
    state, events = state_for(task)
    model = FakeModel(executor=[Completion(text=f"```c\n{TILED[:150]}", model="fake", finish_reason="length"),
                                f"Fixed, complete this time:\n```c kernel.c\n{TILED}```"])
    idea = Idea(idea="Tile i and k by 32", rationale="cache", kind="tiling")
    cand = LLMPolicy(model).execute(state, idea, state.seen)
    assert cand is not None and cand.files == {"kernel.c": TILED}
    assert (cand.parent, cand.idea, cand.author) == (state.baseline.id, "Tile i and k by 32", "llm")
    assert model.roles() == ["executor", "executor"]
    second = model.calls[1][1]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert second[1]["content"].startswith("```c\n") and "cut off" in second[2]["content"]
    assert events.of("proposal")[0]["attempts"] == 2 and not events.of("proposal_failed")


def test_executor_prompt_names_every_knob_key_and_how_flags_combine(task: Task) -> None:
    """A real model asked (gemm transcript, 2026-11-25) whether cflags replace or add to the build's own, and
    guessed the key for bind because the JSON example showed only threads and cflags."""
    state, _ = state_for(task)
    model = FakeModel(executor=[f"```c kernel.c\n{TILED}```"])
    LLMPolicy(model).execute(state, Idea(idea="Tile i and k by 32"), state.seen)
    prompt = model.calls[0][1][-1]["content"]
    assert "added after the build's own `gcc -O3" in prompt and "so repeat any you keep" in prompt
    example = prompt.split("```json")[-1].split("```")[0]
    assert '"threads": null' in example and '"bind": null' in example and '"cflags": []' in example
    assert '"ranks"' not in example  # an OpenMP task has no ranks knob


def test_executor_gives_up_after_the_second_failure_and_logs_it(task: Task) -> None:
    state, events = state_for(task)
    model = FakeModel(executor=["I cannot do that.", f"```c harness.c\n{PARALLEL}```"])
    policy = LLMPolicy(model)
    assert policy.execute(state, Idea(idea="Use AVX-512 intrinsics"), state.seen) is None
    assert model.roles() == ["executor", "executor"]  # exactly one retry
    (failed,) = events.of("proposal_failed")
    assert failed["idea"] == "Use AVX-512 intrinsics" and "harness.c but not kernel.c" in failed["reason"]
    assert "use avx-512 intrinsics" in policy.tried(state)  # not planned again


def test_executor_refuses_unchanged_code_and_gate_rejections(task: Task) -> None:
    state, events = state_for(task)
    evil = PARALLEL.replace("#include <stddef.h>", '#include "secrets.h"')
    model = FakeModel(executor=[f"```c\n{task.baseline_source()}```", f"```c\n{evil}```"])
    assert LLMPolicy(model).execute(state, Idea(idea="noop"), state.seen) is None
    assert "identical to the parent" in model.calls[1][1][2]["content"]
    assert "static gate would reject" in events.of("proposal_failed")[0]["reason"]


def test_executor_knobs_are_checked_against_what_the_evaluator_accepts(task: Task) -> None:
    state, events = state_for(task)
    answer = (f"```c kernel.c\n{PARALLEL}```\n```json\n"
              '{"threads": 2, "bind": "spread", "cflags": ["-march=native", "-fplugin=evil.so", "-ffast-math", "-march=native"],'
              ' "ranks": 4, "defines": {"TILE": 64}}\n```')
    cand = LLMPolicy(FakeModel(executor=[answer])).execute(state, Idea(idea="parallel + native"), state.seen)
    assert cand is not None
    assert (cand.threads, cand.bind, cand.cflags, cand.ranks, cand.defines) == (2, "spread", ["-march=native"], None, {})
    assert check_source(task, cand) is None
    dropped = events.of("proposal")[0]["knobs_dropped"]
    assert "cflag '-fplugin=evil.so'" in dropped and "cflag '-ffast-math'" in dropped  # not allowed for this task
    assert "ranks=4" in dropped and "define TILE=64" in dropped  # not an MPI task; not a tunable
    allowed = allowed_knobs(task, 2)
    assert "-ffast-math" not in allowed["cflags"] and "-march=native" in allowed["cflags"]
    assert allowed["threads"] == [1, 2] and allowed["ranks"] == []


def test_executor_accepts_a_knobs_only_answer(task: Task) -> None:
    parent = Candidate(files={task.kernel: PARALLEL}, idea="parallel", author="llm")
    state, _ = state_for(task, parent=parent)
    cand = LLMPolicy(FakeModel(executor=['Only flags:\n```json\n{"cflags": ["-funroll-loops"]}\n```'])).execute(
        state, Idea(idea="unroll", kind="flags"), state.seen)
    assert cand is not None and cand.files == parent.files and cand.cflags == ["-funroll-loops"] and cand.parent == parent.id


def test_executor_prompt_carries_the_critique_and_the_best_so_far(task: Task) -> None:
    state, _ = state_for(task)
    best = derived(state, PARALLEL, "parallelize")
    state.history.append((best, ok_result(best, 1.9)))
    state.parent = best
    state.critiques[best.id] = Critique(candidate_id=best.id, status="ok", diagnosis="bound by strided reads of b",
                                        bottleneck="memory bandwidth", next_ideas=["interchange j and k"])
    model = FakeModel(executor=[f"```c\n{INTERCHANGE}```"])
    LLMPolicy(model).execute(state, Idea(idea="interchange j and k", kind="memory"), state.seen)
    prompt = model.calls[0][1][0]["content"]
    assert "bound by strided reads of b" in prompt and "memory bandwidth" in prompt
    assert f"1.90x over the baseline (reward ln(speedup) = {math.log(1.9):.3f})" in prompt
    assert PARALLEL.strip() in prompt and "gcc -O3 -fopenmp" in prompt and "2 cores" in prompt


def test_best_so_far_formula(task: Task) -> None:
    state, _ = state_for(task)
    a, b, c = (derived(state, f"{PARALLEL}// {i}\n", f"v{i}") for i in range(3))
    history = [(a, ok_result(a, 2.0)), (b, ok_result(b, 3.0, significant=False)), (c, ok_result(c, 1.5))]
    assert best_so_far([])["reward"] == 0.0 and best_so_far([])["id"] is None
    best = best_so_far(history)
    assert best["id"] == a.id and best["reward"] == round(math.log(2.0), 4)  # 3.0x is not significant: not counted
    discounted = best_so_far(history, gamma=0.5)  # 0.25 * ln 2 = 0.173 < ln 1.5 = 0.405
    assert discounted["id"] == c.id and discounted["reward"] == round(math.log(1.5), 4)


def test_the_prompts_best_is_the_searchs_paired_decision(task: Task) -> None:
    """Two speedups from separate evaluations are not compared once a paired timing against the best exists: a child
    that reads 2.4x against its own baseline timing but 0.99x against the best in the same rounds does not become the
    prompts' best; one 5% faster in the pair does. Every row shows its own time per call and the paired ratio."""
    state, _ = state_for(task)
    a, b, c = (derived(state, f"{PARALLEL}// {i}\n", f"v{i}") for i in range(3))
    tie = ok_result(b, 2.4).model_copy(update={"vs_best": PairedComparison(
        best_id=a.id, ratio=0.99, ci_low=0.97, ci_high=1.01, candidate_median_s=0.5, best_median_s=0.495)})
    win = ok_result(c, 2.1).model_copy(update={"vs_best": PairedComparison(
        best_id=a.id, ratio=1.05, ci_low=1.03, ci_high=1.07, paired_low=1.02, p_value=0.001, candidate_median_s=0.47,
        best_median_s=0.495, replaces_best=True)})
    state.history = [(a, ok_result(a, 2.0)), (b, tie)]
    assert best_so_far(state.history)["id"] == a.id
    state.history.append((c, win))
    assert best_so_far(state.history)["id"] == c.id
    state.parent = c
    model = FakeModel(planner=['{"ideas": [{"idea": "x"}]}'])
    LLMPolicy(model).plan(state, 1)
    prompt = model.calls[0][1][0]["content"]
    assert f"{c.id}: 476 ms per call, 2.10x over the baseline" in prompt
    assert f"- {b.id} [llm, from baseline] -> 417 ms, 2.40x [2.16, 2.64] (faster); vs best {a.id}: 0.99x [0.97, 1.01]" in prompt


# ---------------------------------------------------------------------------------------- critic
def test_critic_parses_the_diagnosis_and_sees_the_evidence(task: Task) -> None:
    state, events = state_for(task)
    racy = derived(state, PARALLEL.replace("double s = 0.0;", "static double s; s = 0.0;"), "parallelize")
    result = EvalResult(candidate_id=racy.id, status="wrong_answer", reason="size 71, seed 3, 2 threads: c[5] = 3.1, expected 2.9",
                        verification=Verification(race_check="race", race_detail="WARNING: ThreadSanitizer: data race on s"))
    model = FakeModel(critic=['```json\n{"diagnosis": "s is shared between threads", "bottleneck": "correctness", '
                              '"next_ideas": ["make s local to the loop body"]}\n```'])
    crit = LLMCritic(model).critique(state, racy, result)
    assert (crit.candidate_id, crit.status, crit.diagnosis) == (racy.id, "wrong_answer", "s is shared between threads")
    assert crit.next_ideas == ["make s local to the loop body"] and crit.bottleneck == "correctness"
    prompt = model.calls[0][1][0]["content"]
    assert "data race on s" in prompt and "c[5] = 3.1, expected 2.9" in prompt
    # a rewrite of most of the small file: the file once, no diff (a small change gets a diff: test_agent_stacking.py)
    assert prompt.count("static double s; s = 0.0;") == 1 and "```diff" not in prompt and "lines differ from the parent" in prompt
    assert "race check: race (the race detector found a data race" in prompt  # the verdict explained where it is shown
    assert "Standing: not kept; the search goes on from the baseline." in prompt
    (logged,) = events.of("critique")
    assert logged == {"candidate_id": racy.id, "critique": crit.model_dump(), "fallback": False}


def test_critic_is_told_whether_the_candidate_was_kept_and_what_the_best_is(task: Task) -> None:
    """'significant' is against the baseline: a candidate that is faster than the baseline but slower than the
    best is shown as not kept, with the best's id and speedup; the best itself is shown as the best; the wait
    phase and the roofline's compulsory bytes are explained where shown."""
    state, _ = state_for(task)
    best, other = derived(state, PARALLEL, "parallelize"), derived(state, TILED, "tile")
    best_r, other_r = ok_result(best, 3.5), ok_result(other, 2.0)
    other_r.phase_s = {"build": 0.2, "wait": 31.0, "time": 2.0}
    state.history = [(best, best_r), (other, other_r)]
    state.parent = best
    model = FakeModel(critic=['{"diagnosis": "x"}'])
    LLMCritic(model).critique(state, other, other_r)
    LLMCritic(model).critique(state, best, best_r)
    first, second = (m[0]["content"] for _, m in model.calls)
    assert f"Standing: not kept; the search goes on from the best so far, {best.id} at 286 ms per call, 3.500x" in first
    assert "not than the best" in first and "wait = queued for the host's timing lock" in first
    assert "Standing: this candidate is the best so far" in second


def test_critic_falls_back_on_a_garbage_answer(task: Task) -> None:
    state, events = state_for(task)
    cand = derived(state, PARALLEL.replace("s = 0.0;", "s = 0.0"), "parallelize")
    result = EvalResult(candidate_id=cand.id, status="compile_error", reason="kernel.c:7: error: expected ';' before 'for'",
                        log="kernel.c:7:27: error: expected ';' before 'for'\n")
    for garbage in ("lol", '{"diagnosis": 42}', '```json\n{"diagnosis": "', ""):
        crit = LLMCritic(FakeModel(critic=[garbage])).critique(state, cand, result)
        assert crit.diagnosis == result.reason and crit.status == "compile_error" and crit.next_ideas == []
    assert all(e["fallback"] for e in events.of("critique")) and len(events.of("critique")) == 4


def test_critic_budget_and_endpoint_errors_propagate(task: Task) -> None:
    state, _ = state_for(task)
    cand = derived(state, PARALLEL, "p")
    for exc in (ModelBudgetExhausted("usd limit"), ModelError("401 unauthorized")):
        with pytest.raises(type(exc)):
            LLMCritic(FakeModel(critic=[exc])).critique(state, cand, ok_result(cand, 1.5))


# ---------------------------------------------------------------------------------------- the policy
def test_llm_policy_end_to_end_on_small_gemm(task: Task, tmp_path: Path) -> None:
    state, events = state_for(task)
    model = FakeModel(planner=[PLAN], executor=[executor_answer],
                      critic=['{"diagnosis": "compute bound in the k loop", "bottleneck": "compute", "next_ideas": ["tile"]}'])
    policy = LLMPolicy(model, LLMCritic(model))
    props = policy.propose(state, 3)
    assert model.roles() == ["planner", "executor", "executor", "executor"]  # no result yet: nothing to critique
    assert [c.files["kernel.c"] for c in props] == [PARALLEL, INTERCHANGE, TILED]
    assert len({c.id for c in props}) == 3 and not {c.id for c in props} & (state.seen | {state.baseline.id})
    for c in props:
        assert c.parent == state.baseline.id and c.author == "llm" and c.idea
        assert c.files["kernel.c"] != state.baseline.files["kernel.c"]
        assert check_source(task, c) is None
    if shutil.which("gcc"):  # the kernels are real C the task's compiler accepts
        for i, c in enumerate(props):
            src = tmp_path / f"k{i}.c"
            src.write_text(c.files["kernel.c"])
            subprocess.run(["gcc", "-O3", "-fopenmp", "-Wall", "-Werror", "-c", str(src), "-o", str(tmp_path / f"k{i}.o")],
                           check=True)

    # The search evaluates them and moves to the best; the next step critiques, then plans anew.
    state.history += [(props[0], ok_result(props[0], 1.9)), (props[1], ok_result(props[1], 2.6)),
                      (props[2], EvalResult(candidate_id=props[2].id, status="wrong_answer", reason="size 71: c[70] wrong"))]
    state.parent = props[1]
    model.script["planner"] = [PLAN.replace("Tile i and k by 32", "Tile j by 64 and unroll k by 4")]
    model.script["executor"] = [f"```c kernel.c\n{TILED.replace('T = 32', 'T = 64')}```"]
    more = policy.propose(state, 2)
    assert model.roles()[4:] == ["critic", "critic", "critic", "planner", "executor"]
    assert set(state.critiques) == {props[1].id, props[2].id, props[0].id}  # the parent's first
    assert len(more) == 1 and more[0].parent == props[1].id and "T = 64" in more[0].files["kernel.c"]
    planner_prompt = model.calls[7][1][0]["content"]
    assert "compute bound in the k loop" in planner_prompt and "2.60x over the baseline" in planner_prompt
    assert "size 71: c[70] wrong" in planner_prompt and INTERCHANGE.strip() in planner_prompt
    assert events.of("plan")[1]["dropped"] == ["Parallelize the i loop with OpenMP", "Interchange the j and k loops (i-k-j order)",
                                               "parallelize the I loop with openmp."]
    assert len(events.of("critique")) == 3 and len(events.of("proposal")) == 4


def test_llm_policy_returns_at_most_n_and_skips_failed_ideas(task: Task) -> None:
    state, events = state_for(task)
    model = FakeModel(planner=[PLAN], executor=["no code, sorry", "still none", executor_answer])
    props = LLMPolicy(model).propose(state, 1)
    assert len(props) == 1 and props[0].files["kernel.c"] == INTERCHANGE  # the first idea was given up
    assert events.of("proposal_failed")[0]["idea"] == "Parallelize the i loop with OpenMP"


@pytest.mark.parametrize("role", ["planner", "executor", "critic"])
def test_budget_exhaustion_and_endpoint_errors_propagate_from_propose(task: Task, role: str) -> None:
    state, _ = state_for(task)
    done = derived(state, PARALLEL, "parallelize")
    state.history.append((done, ok_result(done, 1.5)))
    state.parent = done
    for exc in (ModelBudgetExhausted("token limit reached"), ModelError("context length exceeded")):
        script: dict[str, list[Answer]] = {"planner": [PLAN], "executor": [executor_answer], "critic": ['{"diagnosis": "x"}']}
        script[role] = [exc]
        model = FakeModel(**script)
        with pytest.raises(type(exc)):
            LLMPolicy(model, LLMCritic(model)).propose(state, 2)


def test_hybrid_appends_tuner_variants_of_the_best_llm_candidate(task: Task) -> None:
    state, _ = state_for(task)
    best = derived(state, PARALLEL, "Parallelize the i loop with OpenMP")
    state.history.append((best, ok_result(best, 1.9)))
    state.parent = best
    model = FakeModel(planner=[PLAN], executor=[executor_answer])
    props = LLMPolicy(model, tune=True, tune_k=2).propose(state, 4)
    assert [c.author for c in props] == ["llm", "llm", "tuner", "tuner"]
    tuned = props[2:]
    assert all(c.parent == best.id for c in tuned) and len({c.id for c in props}) == 4
    assert all(c.files != best.files or (c.cflags, c.threads, c.bind) != (best.cflags, best.threads, best.bind) for c in tuned)
    assert all(check_source(task, c) is None for c in props)
    # no verified LLM candidate yet: nothing to tune, the batch is all LLM
    fresh, _ = state_for(task)
    assert {c.author for c in LLMPolicy(FakeModel(planner=[PLAN], executor=[executor_answer]), tune=True).propose(fresh, 3)} == {"llm"}


# ---------------------------------------------------------------------------------------- templates
def _all_vars(task: Task) -> dict[str, dict[str, Any]]:
    state, _ = state_for(task)
    done = derived(state, PARALLEL, "parallelize")
    state.history.append((done, ok_result(done, 1.5)))
    policy = LLMPolicy(FakeModel())
    common = policy._vars(state)
    crit = {"candidate_id": done.id, "diagnosis": "d", "bottleneck": "b", "next_ideas": ["n"]}
    from kernopt.agent.critic import result_vars
    from kernopt.prompts import shared

    return {
        "planner": {**common, "critique": crit, "avoid": ["a"], "kinds": ["tiling"], "max_ideas": 3, "budget_left": 5, "stacking": True,
                    "allowed": allowed_knobs(task, 2), "pending": [{"idea": "p", "rationale": "r", "kind": "tiling"}]},
        "executor": {**common, "critique": crit, "idea": {"idea": "i", "rationale": "r", "kind": "tiling"},
                     "allowed": allowed_knobs(task, 2)},
        "critic": {**shared(state), "code": PARALLEL, "diff": "", "diff_note": "", "result": result_vars(state.history[0][1]),
                   "candidate": {"id": done.id, "idea": "p", "parent": None, "author": "llm", "knobs": done.knobs()},
                   "standing": {"kept": False, "best_id": "b", "best_is_baseline": False, "best_speedup": 2.0,
                                "best_time_s": 0.5}},
        "judge": {**common, "critique": None,
                  "proposals": [{"id": "abc", "idea": "tile", "author": "llm", "knobs": done.knobs(), "diff": "+x"}]},
        "retry": {"reason": "r", "expected": "e"},
    }


def test_templates_render_and_fail_loudly_on_a_missing_variable(task: Task) -> None:
    for name, variables in _all_vars(task).items():
        text = render(name, **variables)
        assert "{{" not in text and "{%" not in text and text.endswith("\n")
        for key in variables:
            with pytest.raises(jinja2.UndefinedError):
                render(name, **{k: v for k, v in variables.items() if k != key})
    planner = _all_vars(task)["planner"]
    with pytest.raises(jinja2.UndefinedError):  # a missing field inside a variable too
        render("planner", **{**planner, "task": {k: v for k, v in planner["task"].items() if k != "signature"}})


def test_templates_are_package_data() -> None:
    here = Path(__file__).resolve().parents[1] / "kernopt" / "prompts"
    assert {p.name for p in here.glob("*.j2")} >= {"planner.j2", "executor.j2", "critic.j2", "judge.j2", "retry.j2", "_shared.j2"}
    judge = (here / "judge.j2").read_text()
    assert judge.startswith("{#") and '"scores"' in judge.split("#}")[0]  # variables and the answer format are documented


# ---------------------------------------------------------------------------------------- litellm mock_response
def test_prompts_go_through_litellm_mock_response(task: Task, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network at import
    litellm = pytest.importorskip("litellm")

    class MockLiteLLM:
        """The messages the policy builds, sent through litellm.completion with scripted answers."""

        name = "openai/mock"

        def __init__(self, answers: dict[str, list[str]]) -> None:
            self.answers, self.spend = answers, Spend()
            self.roles: list[str] = []

        def complete(self, messages: list[Message], *, role: str, **opts: Any) -> Completion:
            self.roles.append(role)
            answer = self.answers[role].pop(0) if len(self.answers[role]) > 1 else self.answers[role][0]
            r = litellm.completion(model=self.name, messages=messages, mock_response=answer)
            return Completion(text=r.choices[0].message.content, model=self.name, finish_reason=r.choices[0].finish_reason,
                              prompt_tokens=r.usage.prompt_tokens, completion_tokens=r.usage.completion_tokens)

    state, _ = state_for(task)
    model = MockLiteLLM({"planner": [PLAN], "executor": ["Nothing here", f"Done:\n```c\n{INTERCHANGE}```\n", f"```c\n{TILED}```"]})
    props = LLMPolicy(model).propose(state, 2)
    assert model.roles == ["planner", "executor", "executor", "executor"]
    assert [c.files["kernel.c"] for c in props] == [INTERCHANGE, TILED]


# ---------------------------------------------------------------------------------------- hostile answers (review findings)
def test_answers_that_break_parsers_never_crash_the_run(task: Task) -> None:
    from kernopt.agent.search import GreedySearch
    from kernopt.agent.value import parse_scores
    from kernopt.config import SearchConfig

    nested = "[" * 5000 + "]" * 5000
    unbalanced_flags = f"```c kernel.c\n{PARALLEL}```\n```json\n{{\"cflags\": \"-O3 \\\"-march=native\"}}\n```"
    model = FakeModel(planner=[f'{{"ideas": {nested}}}',
                               '{"ideas": [{"idea": "split rows across threads", "rationale": "r", "kind": "parallelization"}]}'],
                      executor=[unbalanced_flags], critic=[nested])
    state, events = state_for(task)
    seen: list[Candidate] = []

    def evaluate(c: Candidate, best: object = None) -> tuple[EvalResult, bool]:
        seen.append(c)
        return ok_result(c, 1.5), False

    GreedySearch(SearchConfig(max_candidates=2, batch=1, patience=1), LLMPolicy(model, LLMCritic(model)), evaluate, Hooks()).run(state)
    assert seen and seen[0].cflags == []  # the unreadable flags were dropped, the code kept
    assert parse_scores('{"scores": [{"id": "a", "score": 1' + "0" * 400 + "}]}", ["a"]) in (None, [5.0])  # an absurd number: neutral
    assert parse_scores(nested, ["a"]) is None


def test_templates_are_read_once_per_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A template edited (or upgraded) on disk mid-run does not reach the running process: a loader that read
    on use crashed a real run at its first critique after critic.j2 gained a variable (2026-11-25)."""
    import kernopt.prompts as prompts

    (tmp_path / "x.j2").write_text("hello {{ who }}")
    monkeypatch.setattr(prompts, "HERE", tmp_path)
    prompts._env.cache_clear()
    try:
        assert prompts.render("x", who="a") == "hello a\n"
        (tmp_path / "x.j2").write_text("{{ missing }} {{ who }}")
        assert prompts.render("x", who="b") == "hello b\n"
    finally:
        prompts._env.cache_clear()
