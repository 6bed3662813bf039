"""A real model's conversation, replayed: tests/scenarios/real_gemm.yaml holds the first answers per role that
an assistant acting as the model (through ../shared/tools/llm_relay.py) gave to kernopt's prompts for
tasks/openmp/gemm. Replayed against the current prompts on tests/data/small_gemm (same signature, small sizes)
through real HTTP and litellm, every answer must still be usable: the plan parsed (its twelve ideas, three
taken for a budget of three, the rest logged as dropped), each executor answer a kernel that builds, verifies
and is faster than the baseline, each critique parsed without the fallback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from llm_server import serve

from tests.conftest import REPO, SMALL_GEMM, needs

pytestmark = [pytest.mark.slow, needs("gcc", "clang")]
ENV_KEY = {"OPENAI_API_KEY": "sk-scripted-not-a-key", "KERNOPT_SANDBOX": "local"}


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
