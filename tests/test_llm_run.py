"""The LLM agent end to end: `kernopt optimize --policy llm` against a scripted OpenAI-compatible
server on 127.0.0.1 (real HTTP through litellm), on the built-in gemm task, in the local sandbox.

Scenario tests/scenarios/gemm_improves.yaml: a parallel loop (~2x), the i-k-j order (~6x, the best),
a tiled version that does not compile, and its fix from the critique (correct, serial, ~1x)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from llm_server import ScriptedServer, serve

from tests.conftest import REPO, needs, reap_zombie_children

pytestmark = [pytest.mark.slow, needs("gcc", "clang")]
GEMM = REPO / "tasks" / "openmp" / "gemm"
BEST_IDEA = "reorder the loops to i-k-j with a simd inner loop over j, parallel over i"


def optimize_cmd(server: ScriptedServer, runs: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "kernopt", "optimize", str(GEMM), "--policy", "llm", "--model", "openai/scripted",
            "--api-base", server.api_base, "--budget", "6", "--sandbox", "local", "--runs-dir", str(runs), "--json", *extra]


ENV = os.environ | {"OPENAI_API_KEY": "sk-scripted-not-a-key", "KERNOPT_SANDBOX": "local"}


def events(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("llm-runs")


@pytest.fixture(scope="module")
def full_run(runs: Path) -> tuple[dict[str, Any], ScriptedServer]:
    with serve("gemm_improves.yaml") as server:
        p = subprocess.run(optimize_cmd(server, runs / "full"), env=ENV, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout), server


def test_reaches_the_scenarios_best_and_logs_everything(full_run: tuple[dict[str, Any], ScriptedServer]) -> None:
    summary, server = full_run
    assert summary["best_idea"] == BEST_IDEA and summary["best_status"] == "ok" and summary["best_significant"]
    assert summary["statuses"] == {"ok": 3, "compile_error": 1} and summary["best_speedup"] > 3
    assert server.repeated == 0 and server.unanswered == 0
    assert summary["spend"]["tokens"] > 0 and summary["spend"]["calls"] == server.count and summary["spend"]["usd"] == 0.0  # unpriced
    ev = events(Path(summary["run_dir"]))
    calls = [e for e in ev if e["type"] == "llm"]
    assert len(calls) == server.count and {e["role"] for e in calls} == {"planner", "executor", "critic"}
    assert all(e["messages"] and e["completion"]["text"] for e in calls)  # every prompt and every response
    # the first plan's parent is the baseline, never evaluated: its compiler report (gcc) comes from before the search
    first = calls[0]["messages"][0]["content"]
    assert calls[0]["role"] == "planner" and "## Compiler report on this kernel" in first and "vectorized" in first
    critiques = [e for e in ev if e["type"] == "critique"]
    evals = {e["result"]["candidate_id"]: e for e in ev if e["type"] == "eval"}
    assert len(evals) == 4 and len(critiques) >= 3
    # the fix came from the critique of the candidate that did not compile
    broken = next(e for e in evals.values() if e["result"]["status"] == "compile_error")
    fix_critique = next(c for c in critiques if c["candidate_id"] == broken["result"]["candidate_id"])
    assert "semicolon" in fix_critique["critique"]["diagnosis"]
    fixed = next(e for e in evals.values() if e["candidate"]["idea"] == "fix the compile error in the tiled version")
    assert fixed["result"]["status"] == "ok"


def test_kill_and_resume_repeats_no_request(runs: Path, full_run: tuple[dict[str, Any], ScriptedServer]) -> None:
    with serve("gemm_improves.yaml") as server:
        child = subprocess.Popen(optimize_cmd(server, runs / "killed"), env=ENV, cwd=REPO,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:  # kill during the second evaluation: no request is in flight then
                logs = list((runs / "killed").glob("*/events.jsonl"))
                if logs and sum(1 for e in events(logs[0].parent) if e["type"] == "eval") >= 1:
                    break
                time.sleep(0.2)
            time.sleep(1.0)
            before = server.count
            assert before > 0
        finally:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            reap_zombie_children()
        run_dir = logs[0].parent
        p = subprocess.run([sys.executable, "-m", "kernopt", "optimize", "--resume", str(run_dir), "--json"], env=ENV, cwd=REPO,
                           capture_output=True, text=True, timeout=900)
        assert p.returncode == 0, p.stderr[-3000:]
        resumed = json.loads(p.stdout)
        assert server.repeated == 0 and server.count == full_run[1].count  # the cache answered everything asked before the kill
    assert resumed["best_idea"] == full_run[0]["best_idea"] and resumed["statuses"] == full_run[0]["statuses"]
    assert Counter(e["type"] for e in events(run_dir))["eval"] == 4  # nothing evaluated twice


def test_usd_budget_stops_and_keeps_the_best(runs: Path) -> None:
    # a priced model name (litellm's bundled prices for gpt-4o-mini), answered by the scripted server
    with serve("gemm_improves.yaml") as server:
        cmd = optimize_cmd(server, runs / "budget", "--max-usd", "0.0006")
        cmd[cmd.index("openai/scripted")] = "openai/gpt-4o-mini"
        p = subprocess.run(cmd, env=ENV, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    s = json.loads(p.stdout)
    assert s["stopped_by"].startswith("model budget used") and "max_usd" in s["stopped_by"] and "model budget used" in p.stderr
    assert 0.0006 <= s["spend"]["usd"] < 0.0006 + 0.001 and s["spend"]["calls"] < 17  # stopped at the limit, not after the scenario
    timed = [e["result"] for e in events(Path(s["run_dir"])) if e["type"] == "eval" and e["result"]["status"] == "ok"]
    if timed and all("machine_busy" in r["flags"] for r in timed):
        # the budget allows one or two candidates, each a parallel loop (about 2x on 2 cores): with another process
        # on a core the evaluator's busy rule rightly claims nothing (seen once in a full suite run), so nothing
        # was found to keep
        pytest.skip(f"the machine was too busy to time the candidates: {timed[0]['reason']}")
    assert s["best_candidate"] is not None and s["best_status"] == "ok"  # what was found is kept


def test_rtg_train_on_these_runs_then_value_learned(runs: Path, full_run: tuple[dict[str, Any], ScriptedServer], tmp_path: Path) -> None:
    run_dirs = [p.parent for p in runs.glob("*/*/events.jsonl")]
    model = tmp_path / "rtg.json"
    p = subprocess.run([sys.executable, "-m", "kernopt", "rtg", "train", *map(str, run_dirs), "--out", str(model)],
                       cwd=REPO, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "held-out Spearman rank correlation" in p.stdout and model.is_file()
    with serve("gemm_improves.yaml") as server:
        p = subprocess.run(optimize_cmd(server, runs / "learned", "--value", "learned", "--set", f"search.value_path={model}",
                                        "--budget", "2"), env=ENV, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    ev = events(Path(json.loads(p.stdout)["run_dir"]))
    scores = [e for e in ev if e["type"] == "value"]
    assert scores and all(isinstance(v, float) for e in scores for v in e["scores"].values())


def test_endpoint_failing_for_good_is_an_infrastructure_error(runs: Path) -> None:
    with serve([{"status": 500, "repeat": True}]) as server:
        p = subprocess.run(optimize_cmd(server, runs / "down", "--set", "model.max_retries=1"), env=ENV, cwd=REPO,
                           capture_output=True, text=True, timeout=300)
    assert p.returncode == 3 and "infrastructure error" in p.stderr and "HTTP 500" in p.stderr, p.stderr[-2000:]
    assert server.count == 2  # one try and one bounded retry, then it stops
    run_dir = next((runs / "down").iterdir())
    assert not [e for e in events(run_dir) if e["type"] == "eval"]  # nothing was scored as a candidate failure


def test_a_model_that_answers_prose_only_costs_no_evaluation(runs: Path) -> None:
    prose = "Great question! Optimizing matrix multiplication is a rich topic with many approaches to consider."
    with serve([{"content": prose, "repeat": True}]) as server:
        p = subprocess.run(optimize_cmd(server, runs / "prose"), env=ENV, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    s = json.loads(p.stdout)
    assert s["candidates"] == 0 and s["best_candidate"] is None and "no new proposals" in p.stderr
    plans = [e for e in events(Path(s["run_dir"])) if e["type"] == "plan"]
    assert plans and plans[0]["ideas"] == [] and "no JSON object" in plans[0]["reason"]
    assert server.count == 2  # the unusable plan got one retry with the reason, then the policy gave up


def test_beam_with_the_llm_judge_evaluates_its_favourite_first_and_prunes(runs: Path) -> None:
    with serve("gemm_improves.yaml") as server:
        p = subprocess.run(optimize_cmd(server, runs / "judge", "--search", "beam", "--value", "llm", "--set", "search.keep=1",
                                        "--budget", "2"), env=ENV, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    s = json.loads(p.stdout)
    ev = events(Path(s["run_dir"]))
    values = [e for e in ev if e["type"] == "value"]
    first_eval = next(e for e in ev if e["type"] == "eval")
    assert values[0]["scores"] == {"c013f14b3501": 4.0, "de662a38dd0c": 9.0} and values[0]["kept"] == ["de662a38dd0c"]
    assert first_eval["candidate"]["idea"] == BEST_IDEA  # the judge's favourite, not the planner's first idea
    assert all(len(v["kept"]) <= 1 for v in values) and any(e["type"] == "llm" and e["role"] == "judge" for e in ev)
    assert server.repeated == 0 and s["best_idea"] == BEST_IDEA
