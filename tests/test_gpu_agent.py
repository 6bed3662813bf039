"""The agent on GPU targets: prompts carry the reference and the family's rules, the LLM executor's
Python answer becomes a gated candidate, the critic sees ptxas resources."""

from __future__ import annotations

from typing import Any

import pytest

from kernopt.agent.base import SearchState
from kernopt.agent.critic import result_vars, standing
from kernopt.agent.llm import Idea, LLMPolicy, allowed_knobs
from kernopt.candidate import Candidate
from kernopt.evaluators.result import EvalResult, KernelResources
from kernopt.model import Completion, Spend
from kernopt.prompts import render, shared
from kernopt.task import load_task
from tests.conftest import REPO

pytest.importorskip("kernopt.evaluators.torch_family.py_gate")

VECTOR_ADD = REPO / "tasks" / "triton" / "vector_add"
SAXPY = REPO / "tasks" / "cuda" / "saxpy"

BIGGER_BLOCKS = VECTOR_ADD.joinpath("solution.py").read_text().replace("BLOCK_SIZE = 128", "BLOCK_SIZE = 2048")


class Scripted:
    """A model that answers every executor call with the same text."""

    name = "scripted"

    def __init__(self, answer: str) -> None:
        self.answer, self.prompts, self.spend = answer, [], Spend()

    def complete(self, messages: list[dict[str, Any]], *, role: str, **_: Any) -> Completion:
        self.prompts.append(messages[-1]["content"])
        return Completion(text=self.answer, model=self.name, finish_reason="stop")


def _state(path: Any) -> SearchState:
    task = load_task(path)
    base = Candidate(files={task.kernel: task.baseline_source()}, author="baseline")
    return SearchState(task=task, baseline=base, parent=base, cores=2)


def test_executor_prompt_for_triton_shows_the_reference_and_the_rules() -> None:
    state = _state(VECTOR_ADD)
    model = Scripted(f"```python solution.py\n{BIGGER_BLOCKS}```\n")
    cand = LLMPolicy(model, None).execute(state, Idea(idea="use 2048-element blocks", kind="tiling"), set())
    prompt = model.prompts[-1]
    assert "return a + b" in prompt and "class ModelNew(nn.Module)" in prompt  # the reference's code, the contract
    assert "must not call the reference's torch operations" in prompt and "no try/except" in prompt
    assert "defines.BLOCK_SIZE" in prompt and "-DBLOCK_SIZE" not in prompt
    assert cand is not None and cand.files["solution.py"] == BIGGER_BLOCKS and cand.cflags == []


def test_executor_answer_the_python_gate_rejects_is_not_a_candidate() -> None:
    state = _state(VECTOR_ADD)
    fallback = BIGGER_BLOCKS.replace("        out = torch.empty_like(a)\n", "        return a + b\n")
    model = Scripted(f"```python solution.py\n{fallback}```\n")
    assert LLMPolicy(model, None).execute(state, Idea(idea="let torch do it", kind="other"), set()) is None
    assert len(model.prompts) == 2 and "static gate would reject it" in model.prompts[-1]  # sent back once, with the reason


def test_gpu_targets_offer_only_their_tunables() -> None:
    for path in (VECTOR_ADD, SAXPY):
        task = load_task(path)
        knobs = allowed_knobs(task, cores=2)
        assert knobs["cflags"] == [] and knobs["threads"] == [] and knobs["ranks"] == [] and knobs["bind"] == []
        assert set(knobs["defines"]) == {t.name for t in task.tunables}


def test_critic_sees_resources_and_device() -> None:
    state = _state(SAXPY)
    r = EvalResult(candidate_id="x", status="unverified", reason="compiled for sm_90; no GPU here",
                   resources=[KernelResources(name="saxpy_kernel", arch="sm_90", registers=40, spill_stores=8, spill_loads=8)])
    prompt = render("critic", **shared(state), code=state.task.baseline_source(),
                    candidate={"id": "x", "idea": "i", "parent": None, "author": "user", "knobs": {}}, diff="", diff_note="", result=result_vars(r),
                    standing=standing(state, state.baseline))
    assert "saxpy_kernel: 40 registers, spills 8/8 B" in prompt and "unverified" in prompt
