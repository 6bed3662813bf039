"""Issue 18, items 1 and 3: ideas stack (each planned idea executed against the best at the time and
evaluated before the next), every dropped idea is logged, ideas and critiques pass between roles
whole, the critic gets the kernel source once, and verdicts and flags are explained where shown.

The stacking test talks real HTTP to the scripted server (tests/llm_server.py) through litellm and
asserts on the requests the server received."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from test_llm_policy import INTERCHANGE, PARALLEL, SMALL_GEMM, TILED, FakeModel, derived, ok_result, state_for

from kernopt.agent.critic import LLMCritic
from kernopt.agent.llm import LLMPolicy
from kernopt.agent.search import GreedySearch, Hooks
from kernopt.candidate import Candidate
from kernopt.config import ModelConfig, SearchConfig
from kernopt.evaluators.result import EvalResult
from kernopt.model import LiteLLMModel
from kernopt.task import Task, load_task

pytest_plugins = ["llm_server"]
KEY_ENV = "KERNOPT_TEST_LLM_KEY"

PLAN3 = """```json
{"ideas": [
  {"idea": "Parallelize the i loop with OpenMP", "rationale": "rows are independent", "kind": "parallelization"},
  {"idea": "Interchange the j and k loops (i-k-j order)", "rationale": "unit stride on b", "kind": "memory"},
  {"idea": "Tile i and k by 32", "rationale": "cache reuse", "kind": "tiling"}
]}
```"""
SPEEDUP = {PARALLEL: 1.8, INTERCHANGE: 1.2, TILED: 2.5}  # the first wins, the second loses, the third wins


@pytest.fixture(autouse=True)
def dummy_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test-not-a-real-key")


@pytest.fixture(scope="module")
def task() -> Task:
    return load_task(SMALL_GEMM)


def executor_step(idea: str, code: str) -> dict[str, Any]:
    return {"match": r"## The idea to implement \(\w+\)\n" + re.escape(idea), "repeat": True, "content": f"```c kernel.c\n{code}```"}


def evaluate_by_code(c: Candidate, best: object = None) -> tuple[EvalResult, bool]:
    return ok_result(c, SPEEDUP[c.files["kernel.c"]]), False


def parent_code(prompt: str) -> str:
    m = re.search(r"## Parent kernel .*?\n```c kernel.c\n(.*?)```", prompt, re.S)
    assert m, "the executor prompt shows its parent kernel"
    return m.group(1)


def test_a_plan_of_three_is_executed_one_at_a_time_on_the_best_so_far(task: Task, llm_server: Any) -> None:
    server = llm_server([{"match": "Plan the next optimizations", "content": PLAN3},
                         executor_step("Parallelize the i loop", PARALLEL), executor_step("Interchange the j and k", INTERCHANGE),
                         executor_step("Tile i and k by 32", TILED)])
    model = LiteLLMModel(ModelConfig(name="openai/scripted", api_base=server.api_base, api_key_env=KEY_ENV, timeout_s=10,
                                     max_retries=1), None, None, max_wait_s=5, backoff_base_s=0.01, backoff_max_s=0.05)
    state, events = state_for(task)
    search = GreedySearch(SearchConfig(max_candidates=3, batch=4), LLMPolicy(model), evaluate_by_code, Hooks())
    best = search.run(state)
    prompts = [r.last_user for r in server.requests]
    roles = ["planner" if "Plan the next optimizations" in p else "executor" for p in prompts]
    assert roles == ["planner", "executor", "executor", "executor"]  # one plan, each idea executed after the last evaluation
    assert "3 candidate evaluations left" in prompts[0] and "Propose up to 3 distinct ideas as an ordered sequence" in prompts[0]
    # the second executor request builds on the first idea's candidate (it won); the third too (the second lost)
    assert parent_code(prompts[1]).strip() == task.baseline_source().strip()
    assert parent_code(prompts[2]) == PARALLEL and parent_code(prompts[3]) == PARALLEL
    first, second, third = (c for c, _ in state.history)
    assert (second.parent, third.parent) == (first.id, first.id)
    assert best is not None and best[0].id == third.id
    assert not events.of("idea_dropped") and server.unanswered == 0


def test_planned_ideas_left_when_the_budget_ends_are_logged_as_dropped(task: Task) -> None:
    plan4 = PLAN3.replace('"kind": "tiling"}', '"kind": "tiling"},\n  {"idea": "Use -O3 -march=native", "kind": "flags"}')
    model = FakeModel(planner=[plan4], executor=[lambda m: f"```c kernel.c\n{next(k for key, k in BY_IDEA.items() if key in idea_of(m))}```"])
    state, events = state_for(task)
    GreedySearch(SearchConfig(max_candidates=2, batch=4), LLMPolicy(model), evaluate_by_code, Hooks()).run(state)
    assert model.roles() == ["planner", "executor", "executor"]
    assert events.of("plan")[0]["asked"] == 2  # the budget left, not more
    dropped = events.of("idea_dropped")
    assert [d["idea"] for d in dropped] == ["Tile i and k by 32", "Use -O3 -march=native"]
    assert dropped[0]["reason"] == "beyond the 2 ideas asked for"


def test_an_idea_the_executor_cannot_implement_is_logged_as_dropped(task: Task) -> None:
    model = FakeModel(planner=[PLAN3], executor=["no code, sorry", "still none", f"```c kernel.c\n{INTERCHANGE}```"])
    state, events = state_for(task)
    (cand,) = LLMPolicy(model).propose(state, 1)
    (dropped,) = events.of("idea_dropped")
    assert dropped["idea"] == "Parallelize the i loop with OpenMP" and dropped["reason"].startswith("the executor's answers could not be used")
    assert cand.idea == "Interchange the j and k loops (i-k-j order)"


def test_queued_ideas_are_dropped_with_a_reason_at_the_end_and_when_the_parent_changes(task: Task) -> None:
    model = FakeModel(planner=[PLAN3], executor=[lambda m: f"```c kernel.c\n{next(k for key, k in BY_IDEA.items() if key in idea_of(m))}```"])
    policy = LLMPolicy(model)
    state, events = state_for(task)
    state.budget_left = 3
    (c1,) = policy.propose(state, 1)
    other = derived(state, TILED.replace("T = 32", "T = 16"), "something else")
    state.history.append((other, ok_result(other, 1.1)))
    state.parent = other  # a search that hops to a node the plan was not made for
    policy.propose(state, 1)
    moved = events.of("idea_dropped")
    assert [d["idea"] for d in moved] == ["Interchange the j and k loops (i-k-j order)", "Tile i and k by 32"]
    assert all(f"moved to candidate {other.id}" in d["reason"] for d in moved)
    policy.finish(state, "candidate budget of 3 used")
    assert events.of("idea_dropped")[-1]["reason"] == "not executed: candidate budget of 3 used"


def test_a_long_idea_reaches_the_executor_whole(task: Task) -> None:
    long_idea = "Restructure the kernel: " + " ".join(f"step {i}: block the loops by {8 * i} and C(len-1+p-q, p-{i})" for i in range(60))
    assert len(long_idea) > 1000
    rationale = "because " + "x" * 1500
    plan = json.dumps({"ideas": [{"idea": long_idea, "rationale": rationale, "kind": "tiling"}]})
    model = FakeModel(planner=[plan], executor=[f"```c kernel.c\n{TILED}```"])
    state, events = state_for(task)
    (cand,) = LLMPolicy(model).propose(state, 1)
    executor_prompt = model.calls[1][1][0]["content"]
    assert long_idea in executor_prompt and rationale in executor_prompt
    assert cand.idea == long_idea and events.of("proposal")[0]["idea"] == long_idea


def test_critiques_reach_the_planner_and_executor_whole(task: Task) -> None:
    diagnosis = "the inner loop " + "reads b with a stride of n doubles, " * 60
    suggestion = "interchange " + "and keep a block of c in registers " * 40
    assert len(diagnosis) > 1200 and len(suggestion) > 1000
    model = FakeModel(critic=[json.dumps({"diagnosis": diagnosis, "bottleneck": "memory", "next_ideas": [suggestion]})],
                      planner=[PLAN3.replace("Parallelize the i loop with OpenMP", "Interchange the j and k loops")],
                      executor=[f"```c kernel.c\n{INTERCHANGE}```"])
    state, _ = state_for(task)
    done = derived(state, PARALLEL, "parallelize")
    state.history.append((done, ok_result(done, 1.5)))
    state.parent = done
    LLMPolicy(model, LLMCritic(model)).propose(state, 1)
    planner_prompt = next(m for r, m in model.calls if r == "planner")[0]["content"]
    executor_prompt = next(m for r, m in model.calls if r == "executor")[0]["content"]
    for prompt in (planner_prompt, executor_prompt):
        assert diagnosis.strip() in prompt and suggestion.strip() in prompt


def test_the_critic_gets_the_source_once_and_a_small_change_as_a_diff(task: Task) -> None:
    state, _ = state_for(task)
    helpers = "\n".join(f"static double helper{i}(double x) {{ return x * {i}.0 + 1.0; }}" for i in range(40))
    parent = derived(state, PARALLEL + helpers, "parallelize")
    state.history.append((parent, ok_result(parent, 1.5)))
    small = Candidate(files={"kernel.c": (PARALLEL + helpers).replace("double s = 0.0;", "double s = 0.0; /* acc */")}, parent=parent.id,
                      idea="comment", author="llm")
    model = FakeModel(critic=['{"diagnosis": "d"}'])
    LLMCritic(model).critique(state, small, ok_result(small, 1.5))
    prompt = model.calls[0][1][0]["content"]
    # the whole file once: the diff has only the changed lines and their context
    assert prompt.count("rows split across threads") == 1 and prompt.count("static double helper39(") == 1
    assert "```diff" in prompt and "+            double s = 0.0; /* acc */" in prompt
    rewrite = Candidate(files={"kernel.c": TILED}, parent=parent.id, idea="tile", author="llm")
    LLMCritic(model).critique(state, rewrite, ok_result(rewrite, 1.5))
    prompt = model.calls[1][1][0]["content"]
    assert prompt.count(TILED.strip()) == 1 and prompt.count("const long T = 32;") == 1 and "```diff" not in prompt


def test_flags_and_verdicts_are_explained_in_critic_and_planner_prompts(task: Task) -> None:
    state, _ = state_for(task)
    fast = derived(state, PARALLEL, "parallelize")
    flagged = ok_result(fast, 3.7, significant=False).model_copy(update={"flags": ["implausible_speedup", "timing_inconsistent"]})
    state.history.append((fast, flagged))
    model = FakeModel(critic=['{"diagnosis": "d"}'], planner=[PLAN3], executor=[f"```c kernel.c\n{TILED}```"])
    LLMCritic(model).critique(state, fast, flagged)
    critic_prompt = model.calls[0][1][0]["content"]
    assert "implausible_speedup: above the plausible bound" in critic_prompt
    assert "timing_inconsistent: the kernel times the monitor measured do not add up to the process wall clock" in critic_prompt
    assert "not significant (the 95% interval or the paired per-round bound reaches 1" in critic_prompt
    assert "race check: clean (the race detector ran" in critic_prompt
    LLMPolicy(model).plan(state, 3)
    planner_prompt = model.calls[1][1][0]["content"]
    assert "[flags: implausible_speedup, timing_inconsistent]" in planner_prompt
    assert "- not significant: the 95% interval or the paired per-round bound reaches 1" in planner_prompt
    assert "- implausible_speedup: above the plausible bound" in planner_prompt


def test_a_prompt_over_its_bound_loses_history_lines_not_ideas(task: Task) -> None:
    state, _ = state_for(task)
    for i in range(8):
        c = derived(state, PARALLEL.replace("s = 0.0", f"s = {i}.0"), f"variant {i} " + "y" * 400)
        state.history.append((c, ok_result(c, 1.1 + 0.01 * i)))
    long_idea = "z" * 3000
    plan = json.dumps({"ideas": [{"idea": long_idea, "kind": "tiling"}]})
    model = FakeModel(planner=[plan], executor=[f"```c kernel.c\n{TILED}```"])
    full = LLMPolicy(FakeModel(planner=[plan], executor=[f"```c kernel.c\n{TILED}```"]))
    full.propose(state, 1)
    unbounded = full.model.calls[1][1][0]["content"]  # type: ignore[attr-defined]
    LLMPolicy(model, prompt_chars=len(unbounded) - 1500).propose(state, 1)
    bounded = model.calls[1][1][0]["content"]
    assert len(bounded) <= len(unbounded) - 1500 and long_idea in bounded
    assert "variant 7" in bounded and "variant 0" not in bounded  # the oldest history went first


BY_IDEA = {"parallelize": PARALLEL, "interchange": INTERCHANGE, "tile": TILED, "-o3": TILED.replace("T = 32", "T = 64")}


def idea_of(messages: list[Any]) -> str:
    m = re.search(r"## The idea to implement \(\w+\)\n(.*)", messages[0]["content"])
    assert m
    return m.group(1).lower()



# ---------------------------------------------------------------------------------------- item 2: context
def profile(bandwidth: dict[int, float], peak: dict[int, float]) -> Any:
    from kernopt.hw.probe import HardwareProfile, HostFingerprint

    fp = HostFingerprint(cpu_model="test cpu", cores=2, memory_mb=4096, kernel="6.0", sandbox="local", compiler="gcc 12")
    return HardwareProfile(fingerprint=fp, bandwidth_gbps=bandwidth, peak_gflops=peak, llc_bytes=1 << 25, array_bytes=1 << 27,
                           reps=3, vector_bits=512, measured_at="2026-11-25T17:00:00Z", probe_s=3.0)


def test_planner_and_executor_get_the_machine_tolerances_gates_and_knobs(task: Task) -> None:
    from kernopt.agent.context import cpu

    state, _ = state_for(task)
    state.profile = profile({1: 12.5, 2: 20.0}, {1: 30.0, 2: 60.0})
    model = FakeModel(planner=[PLAN3], executor=[f"```c kernel.c\n{PARALLEL}```"])
    LLMPolicy(model).propose(state, 1)
    for role, messages in model.calls:
        prompt = messages[0]["content"]
        assert "measured memory bandwidth (STREAM triad): 12.5 GB/s at 1 thread, 20.0 GB/s at 2 threads" in prompt, role
        assert "measured FP64 peak (FMA, 512-bit vectors): 30.0 GFLOP/s at 1 thread, 60.0 GFLOP/s at 2 threads" in prompt
        assert "the profile looks undisturbed" in prompt
        assert "rtol 1e-09, atol 1e-12 elementwise" in prompt and "fast-math: not allowed" in prompt
        assert "sched_yield" in prompt and "refused calls:" in prompt and "pthread_create" in prompt
        if cpu()["isa"]:
            assert "vector ISA: " in prompt
        if cpu()["caches"]:
            assert "caches (per cpu0): L1d" in prompt
        if "cpu family" in Path("/proc/cpuinfo").read_text():  # x86: the generation, not only "AMD EPYC"
            assert re.search(r"CPU: .+ \(family \d+, model \d+", prompt), role
    planner = model.calls[0][1][0]["content"]
    assert "Knobs an idea may set besides the code: cflags from -O2 -O3" in planner and "threads 1/2;" in planner
    state.profile = profile({1: 12.5, 2: 6.0}, {1: 30.0, 2: 60.0})  # more threads, less bandwidth: measured while busy
    model = FakeModel(planner=[PLAN3], executor=[f"```c kernel.c\n{PARALLEL}```"])
    LLMPolicy(model).plan(state, 2)
    assert "this profile looks disturbed (more threads gave less bandwidth)" in model.calls[0][1][0]["content"]


def test_the_rest_of_a_plan_is_revised_after_three_ideas(task: Task) -> None:
    """A plan of five: after three were measured, the planner is asked again with the two it has not reached
    (to keep, reorder or replace in the light of the results and critiques since); they are logged as dropped
    by the revision, and the revised plan's ideas are the ones executed next."""
    plan5 = {"ideas": [{"idea": f"idea {i}", "rationale": f"because {i}", "kind": "tiling"} for i in range(1, 6)]}
    revised = {"ideas": [{"idea": "the critic's favourite", "rationale": "suggested twice", "kind": "tiling"},
                         {"idea": "idea 5", "rationale": "still good", "kind": "tiling"}]}
    codes = [PARALLEL, INTERCHANGE, TILED, PARALLEL + "\n// five\n", TILED + "\n// four\n"]
    model = FakeModel(planner=[json.dumps(plan5), json.dumps(revised)], executor=[f"```c kernel.c\n{c}```" for c in codes])
    state, events = state_for(task)
    GreedySearch(SearchConfig(max_candidates=5, batch=4), LLMPolicy(model), lambda c, _best: (ok_result(c, 1.5), False), Hooks()).run(state)
    assert model.roles() == ["planner", "executor", "executor", "executor", "planner", "executor", "executor"]
    second = [m for r, m in model.calls if r == "planner"][1][-1]["content"]
    assert "## Your previous plan, not yet executed" in second and "- idea 4 (because 4)" in second and "- idea 5" in second
    assert "2 candidate evaluations left" in second
    assert [c.idea for c, _ in state.history] == ["idea 1", "idea 2", "idea 3", "the critic's favourite", "idea 5"]
    dropped = [e for e in events.of("idea_dropped") if e["reason"].startswith("revised")]
    assert [e["idea"] for e in dropped] == ["idea 4", "idea 5"]
    assert [p["revision"] for p in events.of("plan")] == [False, True]
