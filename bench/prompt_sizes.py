"""Prompt sizes per role (planner, executor, critic, judge, retry) at candidates 1, 6 and 12 of a recorded gemm run.

    .venv/bin/python bench/prompt_sizes.py            # the table, from tests/data/gemm_run12.json
    .venv/bin/python bench/prompt_sizes.py --record   # re-record that run (a real 12-candidate optimize, minutes)

The run: `kernopt optimize tests/data/small_gemm --policy llm --budget 12` (greedy, local sandbox, no race check)
against the scripted server, answering with tests/scenarios/real_gemm.yaml (a real model's first answers through
the relay: its plan of 12 ideas, 3 kernels, 2 critiques) extended to 12 candidates in the same pattern
(`extended_scenario`): the plan's revisions keep the real ideas in their order, ideas 4-12 are the real kernels with
their block sizes changed or knob-only answers (what the plan asked for those ideas), and critiques 3-12 repeat the
two real ones (their length, not their content, is what a prompt carries on). Every candidate was really built,
verified and timed; the fixture keeps the baseline, each candidate with its result, and each critique.

The sizes: the state at candidate k is the recorded run's first k-1 evaluations (k for the critic, which reviews
candidate k), with the parent the candidate k was built on. Each role's prompt is made by the real code path
(LLMPolicy.plan / execute, LLMCritic, LLMJudge) with a scripted model that records what it is sent; the size is the
UTF-8 bytes of all messages of one request (the retry: the executor's second request after an unusable answer).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
FIXTURE = Path(os.environ.get("PROMPT_FIXTURE", REPO / "tests" / "data" / "gemm_run12.json"))
SCENARIO = REPO / "tests" / "scenarios" / "real_gemm.yaml"
AT = (1, 6, 12)
ROLES = ("planner", "executor", "critic", "judge", "retry")


# ------------------------------------------------------------------ recording
def extended_scenario() -> list[dict[str, Any]]:
    """real_gemm.yaml's steps extended to a 12-candidate greedy run (see the module docstring)."""
    steps = yaml.safe_load(SCENARIO.read_text())["steps"]
    planner = [s for s in steps if "Plan the next" in s["match"]]
    executor = [s for s in steps if "Implement one" in s["match"]]
    critic = [s for s in steps if "reviewing one" in s["match"]]
    plan = json.loads(planner[0]["content"].split("```json", 1)[1].split("```", 1)[0])["ideas"]
    k1, k2, k3 = (s["content"] for s in executor)

    def variant(answer: str, **defines: int) -> str:
        for name, value in defines.items():
            head, sep, rest = answer.partition(f"#define {name} ")
            answer = head + sep + str(value) + rest[rest.index("\n"):]
        return answer

    def knobs(obj: dict[str, Any]) -> str:
        return f"```json\n{json.dumps(obj)}\n```\n"

    answers = [k1, k2, k3, variant(k3, MC=128), variant(k2, MC=128), knobs({"bind": "close", "threads": 2}),
               knobs({"cflags": ["-O3", "-march=native", "-funroll-loops"]}), variant(k3, KC=192), variant(k2, MC=32),
               variant(k3, KC=160, MC=80), knobs({"cflags": ["-O3", "-march=native", "-mprefer-vector-width=512", "-mtune=native"]}),
               knobs({"threads": 1})]
    out = [planner[0]]
    for start in (3, 6, 9):  # revise_every = 3: the revisions keep the rest of the plan in its order
        out.append({"match": planner[0]["match"], "content": "```json\n" + json.dumps({"ideas": plan[start:]}) + "\n```\n"})
    out += [{"match": executor[0]["match"], "content": a} for a in answers]
    out += [{"match": critic[0]["match"], "content": critic[i % 2]["content"]} for i in range(12)]
    out[-1]["repeat"] = True
    return out


def record() -> None:
    """Run the extended scenario for real and keep the run as the fixture."""
    sys.path.insert(0, str(REPO / "tests"))
    from llm_server import serve

    with tempfile.TemporaryDirectory() as tmp, serve(extended_scenario()) as server:
        env = os.environ | {"OPENAI_API_KEY": "sk-scripted-not-a-key", "KERNOPT_SANDBOX": "local"}
        p = subprocess.run([sys.executable, "-m", "kernopt", "optimize", str(REPO / "tests/data/small_gemm"), "--policy", "llm",
                            "--model", "openai/scripted", "--api-base", server.api_base, "--budget", "12", "--sandbox", "local",
                            "--no-race-check", "--runs-dir", tmp, "--json"], env=env, cwd=REPO, capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(p.stderr[-3000:])
        run_dir = Path(json.loads(p.stdout)["run_dir"])
        events = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines() if x]
    start = next(e for e in events if e["type"] == "start")
    sent = [(e["role"], e["messages"]) for e in events if e["type"] == "llm"]
    first_plan = next(m[-1]["content"] for r, m in sent if r == "planner")
    report = first_plan.split("## Compiler report on this kernel", 1)[1].split("```text\n", 1)[1].split("\n```", 1)[0] \
        if "## Compiler report on this kernel" in first_plan else None
    fixture = {
        "about": "tests/data/small_gemm, 12 candidates, recorded by bench/prompt_sizes.py --record (see its docstring)",
        "baseline": start["baseline"], "baseline_report": report,
        "evals": [{"candidate": e["candidate"], "result": e["result"]} for e in events if e["type"] == "eval"],
        "critiques": [e["critique"] for e in events if e["type"] == "critique"],
        "plan": next(e["ideas"] for e in events if e["type"] == "plan"),
    }
    FIXTURE.write_text(json.dumps(fixture, indent=1) + "\n")
    print(f"{FIXTURE.relative_to(REPO)}: {len(fixture['evals'])} candidates, {len(fixture['critiques'])} critiques")


# ------------------------------------------------------------------ measuring
class Scripted:
    """A model that records each request and answers from a list (the last answer repeats)."""

    name = "scripted"

    def __init__(self, answers: list[str]) -> None:
        from kernopt.model import Spend

        self.spend = Spend()
        self.answers = answers
        self.requests: list[tuple[str, list[dict[str, str]]]] = []

    def complete(self, messages: list[Any], *, role: str, **_: Any) -> Any:
        from kernopt.model import Completion

        self.requests.append((role, [dict(m) for m in messages]))
        text = self.answers[min(len(self.requests) - 1, len(self.answers) - 1)]
        return Completion(text=text, model=self.name)


def size(messages: list[dict[str, str]]) -> int:
    return sum(len(m["content"].encode()) for m in messages)


def load(path: Path = FIXTURE) -> dict[str, Any]:
    from kernopt.agent.base import Critique
    from kernopt.candidate import Candidate
    from kernopt.evaluators.result import EvalResult

    data = json.loads(path.read_text())
    return {"baseline": Candidate.model_validate(data["baseline"]), "baseline_report": data.get("baseline_report"),
            # fields an older EvalResult lacks (vs_best) are left out, so the code before a change can be measured too
            "evals": [(Candidate.model_validate(e["candidate"]),
                       EvalResult.model_validate({k: v for k, v in e["result"].items() if k in EvalResult.model_fields}))
                      for e in data["evals"]],
            "critiques": [Critique.model_validate(c) for c in data["critiques"]], "plan": data["plan"]}


def state_at(run: dict[str, Any], k: int, *, critic: bool = False) -> Any:
    """The search state when candidate k (1-based) is planned and executed, or (critic) just evaluated."""
    from kernopt.agent.base import SearchState
    from kernopt.task import load_task

    evals = run["evals"][: k if critic else k - 1]
    by_id = {c.id: c for c, _ in run["evals"]} | {run["baseline"].id: run["baseline"]}
    if critic:  # the critic runs after the search has taken (or not) candidate k as its new parent
        nxt = run["evals"][k][0].parent if k < len(run["evals"]) else run["evals"][k - 1][0].parent  # the run ended
        parent = by_id.get(nxt or "", run["baseline"])
    else:
        parent = by_id.get(run["evals"][k - 1][0].parent or "", run["baseline"])
    done = {c.id for c, _ in evals}
    critiques = {c.candidate_id: c for c in run["critiques"] if c.candidate_id in done}
    if critic:
        critiques.pop(run["evals"][k - 1][0].id, None)
    return SearchState(task=load_task(REPO / "tests/data/small_gemm"), baseline=run["baseline"], parent=parent,
                       history=list(evals), cores=2, critiques=critiques, budget_left=12 - len(evals),
                       baseline_report=run["baseline_report"])


def prompts_at(run: dict[str, Any], k: int) -> dict[str, list[dict[str, str]]]:
    """Each role's request (its messages) at candidate k."""
    from kernopt.agent.critic import LLMCritic
    from kernopt.agent.llm import Idea, LLMPolicy
    from kernopt.agent.value import LLMJudge

    cand, result = run["evals"][k - 1]
    out: dict[str, list[dict[str, str]]] = {}
    state = state_at(run, k)
    plan = [Idea.model_validate(i) for i in run["plan"]]
    model = Scripted(['```json\n{"ideas": [{"idea": "x", "rationale": "y", "kind": "other"}]}\n```'])
    LLMPolicy(model).plan(state, 12 - (k - 1), pending=plan[k - 1:] if k > 1 else None)
    out["planner"] = model.requests[0][1]
    code = cand.files[state.task.kernel]
    answer = f"```c kernel.c\n{code}\n```\n```json\n{json.dumps(cand.knobs())}\n```\n"
    model = Scripted(["I would rather explain the idea first.", answer])
    LLMPolicy(model).execute(state, Idea(idea=cand.idea), set())
    out["executor"], out["retry"] = model.requests[0][1], model.requests[1][1]
    nxt = [c for c, _ in run["evals"][k - 1: k + 1]]
    model = Scripted(['{"scores": []}'])
    LLMJudge(model).score(state, nxt)
    out["judge"] = model.requests[0][1]
    model = Scripted(['{"diagnosis": "x"}'])
    LLMCritic(model).critique(state_at(run, k, critic=True), cand, result)
    out["critic"] = model.requests[0][1]
    return out


def table(run: dict[str, Any] | None = None) -> dict[str, dict[int, int]]:
    """{role: {k: bytes}} at candidates 1, 6 and 12."""
    run = run or load()
    sizes: dict[str, dict[int, int]] = {r: {} for r in ROLES}
    for k in AT:
        for role, messages in prompts_at(run, k).items():
            sizes[role][k] = size(messages)
    return sizes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--record", action="store_true", help="re-record the 12-candidate run (minutes)")
    ap.add_argument("--dump", type=Path, help="also write each prompt to this directory")
    args = ap.parse_args()
    if args.record:
        record()
    run = load()
    if args.dump:
        args.dump.mkdir(parents=True, exist_ok=True)
        for k in AT:
            for role, messages in prompts_at(run, k).items():
                (args.dump / f"{role}-{k:02d}.txt").write_text("\n\n=====\n\n".join(m["content"] for m in messages))
    sizes = table(run)
    print("| role | " + " | ".join(f"candidate {k}" for k in AT) + " |")
    print("|---|" + "---|" * len(AT))
    for role in ROLES:
        print(f"| {role} | " + " | ".join(f"{sizes[role][k]:,}" for k in AT) + " |")


if __name__ == "__main__":
    main()
