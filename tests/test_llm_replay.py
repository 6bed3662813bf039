"""A real model's conversation, replayed: tests/scenarios/real_gemm.yaml holds the first answers per role that
an assistant acting as the model (through ../shared/tools/llm_relay.py) gave to kernopt's prompts for
tasks/openmp/gemm. Replayed against the current prompts on tests/data/small_gemm (same signature, small sizes)
through real HTTP and litellm, every answer must still be usable: the plan parsed (its twelve ideas, three
taken for a budget of three, the rest logged as dropped), each executor answer a kernel that builds, verifies
and is faster than the baseline, each critique parsed without the fallback.

The prompt budget: tests/data/gemm_run12.json is that conversation extended to twelve candidates and run for real
(bench/prompt_sizes.py --record); each role's prompt at candidates 1, 6 and 12 is rebuilt from it by the real code
paths and must stay within the sizes docs/llm.md states, with each idea written once and each candidate's time per
call shown."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from llm_server import serve

from kernopt.prompts import flat, per_call
from tests.conftest import REPO, SMALL_GEMM, needs

ENV_KEY = {"OPENAI_API_KEY": "sk-scripted-not-a-key", "KERNOPT_SANDBOX": "local"}
# The budget (bytes of one request, all messages) at the twelfth candidate of the recorded gemm run, per role: the
# sizes measured after "each fact once" (docs/llm.md) with a few hundred bytes of slack for another machine's CPU
# lines. Before, the same state gave planner 26.1 KB (28.9 KB at the sixth), executor 21.8 KB, critic 16.1 KB.
BUDGET_AT_12 = {"planner": 22_000, "executor": 20_600, "critic": 16_600, "judge": 16_900, "retry": 20_900}


@cache
def sizes_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("prompt_sizes", REPO / "bench" / "prompt_sizes.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@cache
def prompts_at(k: int) -> dict[str, str]:
    m = sizes_module()
    return {role: "\n".join(x["content"] for x in messages) for role, messages in m.prompts_at(m.load(), k).items()}


def test_prompt_sizes_at_the_twelfth_candidate_stay_within_the_budget() -> None:
    m = sizes_module()
    run = m.load()
    assert len(run["evals"]) == 12 and len({c.parent for c, _ in run["evals"]}) > 1  # the search moved: a real parent
    sizes = m.table(run)
    for role, limit in BUDGET_AT_12.items():
        assert sizes[role][12] <= limit, (role, sizes[role])
    assert sizes["planner"][6] <= BUDGET_AT_12["planner"], sizes["planner"]


@pytest.mark.parametrize("k", [6, 12])
def test_each_idea_is_written_once_in_a_planner_and_an_executor_prompt(k: int) -> None:
    run = sizes_module().load()
    for role in ("planner", "executor", "judge"):
        prompt = flat(prompts_at(k)[role])
        for cand, _ in run["evals"][: k - 1]:
            # the planner names every tried idea (in the table, or under "Already tried" when older); the others show
            # the table only (the last 8, the best and the parent)
            once = role == "planner" or f"- {cand.id} [" in prompts_at(k)[role]
            assert prompt.count(flat(cand.idea)) == (1 if once else 0), (role, k, cand.id, prompt.count(flat(cand.idea)))
    # the critique the planner shows in full is not repeated in the table, and the parent is referred to by id
    planner = prompts_at(k)["planner"]
    latest = planner.split("## Latest critique (of ", 1)[1].split(")", 1)[0]
    assert f"- {latest} [" in planner and "critique: in full below" in planner
    assert "(idea and outcome in the candidates above)" in planner


def test_a_bounded_planner_prompt_still_names_every_tried_idea_once() -> None:
    """Rows left out to fit `prompt_chars` (oldest first, the best's and the parent's last) move their ideas to
    "Already tried": nothing tried is forgotten and nothing is said twice."""
    from kernopt.agent.llm import LLMPolicy

    m = sizes_module()
    run = m.load()
    state = m.state_at(run, 12)
    model = m.Scripted(['{"ideas": [{"idea": "x"}]}'])
    LLMPolicy(model, prompt_chars=20_500).plan(state, 1)
    prompt = model.requests[0][1][0]["content"]
    assert len(prompt) <= 20_500 and f"- {state.parent.id} [" in prompt
    rows = [c for c, _ in run["evals"][:11] if f"- {c.id} [" in prompt]
    assert 0 < len(rows) < 9  # some rows went
    for cand, _ in run["evals"][:11]:
        assert flat(prompt).count(flat(cand.idea)) == 1, cand.id


def test_every_timed_candidate_shows_its_time_per_call_and_its_paired_ratio() -> None:
    run = sizes_module().load()
    planner = prompts_at(12)["planner"]
    rows = [line for line in planner.splitlines() if line.startswith("- ") and " -> " in line]
    shown = 0
    for cand, result in run["evals"][:11]:
        row = next((r for r in rows if r.startswith(f"- {cand.id} [")), None)
        if row is None or result.timing is None:
            continue
        shown += 1
        assert f"-> {per_call(result.timing.candidate_median_s)}, {result.timing.speedup:.2f}x [" in row, row
        vs = result.vs_best
        if vs is not None:
            assert f"vs best {vs.best_id}: {vs.ratio:.2f}x [{vs.ci_low:.2f}, {vs.ci_high:.2f}]" in row, row
    assert shown >= 8
    best = planner.split("## Best so far\n", 1)[1].split("\n", 1)[0]
    assert " per call, " in best, best


@pytest.mark.slow
@needs("gcc", "clang")
def test_a_real_gemm_conversation_still_works_with_the_current_prompts(tmp_path: Path) -> None:
    import os

    with serve("real_gemm.yaml") as server:
        p = subprocess.run([sys.executable, "-m", "kernopt", "optimize", str(SMALL_GEMM), "--policy", "llm",
                            "--model", "openai/scripted", "--api-base", server.api_base, "--budget", "3",
                            "--sandbox", "local", "--runs-dir", str(tmp_path), "--json"],
                           env=os.environ | ENV_KEY, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    summary = json.loads(p.stdout)
    events: list[dict[str, Any]] = [json.loads(x) for x in (Path(summary["run_dir"]) / "events.jsonl").read_text().splitlines() if x]
    of = lambda kind: [e for e in events if e["type"] == kind]  # noqa: E731
    assert server.unanswered == 0 and server.repeated == 0
    (plan,) = of("plan")
    assert plan["source"] == "planner" and plan["asked"] == 3 and len(plan["ideas"]) == 3
    assert len([e for e in of("idea_dropped") if "beyond the 3 ideas asked for" in e["reason"]]) == 9
    assert not of("proposal_failed") and len(of("proposal")) == 3
    assert of("critique") and not [e for e in of("critique") if e["fallback"]]
    assert summary["statuses"] == {"ok": 3}, summary["statuses"]
    assert summary["best_significant"] and summary["best_speedup"] > 1.5, summary
