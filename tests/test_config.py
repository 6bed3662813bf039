"""The run configuration: defaults < config file (YAML or TOML) < command-line flags < --set overrides."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernopt.config import resolve_run_config
from kernopt.errors import UserError
from tests.conftest import REPO, SMALL_GEMM


def test_layers_in_order(tmp_path: Path) -> None:
    f = tmp_path / "run.yaml"
    f.write_text("task: tasks/openmp/gemm\npolicy: llm\nsearch:\n  type: beam\n  beam_width: 3\n  max_candidates: 7\n"
                 "model:\n  name: ollama/qwen2.5-coder\n  api_base: http://127.0.0.1:11434\n  temperature: 0.2\n")
    c = resolve_run_config(f)
    assert (c.policy, c.search.type, c.search.beam_width, c.search.max_candidates) == ("llm", "beam", 3, 7)
    assert (c.model.name, c.model.api_base, c.model.temperature, c.search.patience) == ("ollama/qwen2.5-coder", "http://127.0.0.1:11434", 0.2, 3)
    c = resolve_run_config(f, {"search.max_candidates": 9, "search.type": None, "model.name": "openai/gpt-4o"},
                           ["search.beam_width=5", "model.max_usd=0.5", "search.value=learned", "model.cache=false"])
    assert (c.search.max_candidates, c.search.type, c.model.name) == (9, "beam", "openai/gpt-4o")  # a None flag was not given
    assert (c.search.beam_width, c.model.max_usd, c.search.value, c.model.cache) == (5, 0.5, "learned", False)


def test_toml_file(tmp_path: Path) -> None:
    f = tmp_path / "run.toml"
    f.write_text('task = "tasks/mpi/dot"\n[search]\ntype = "evolve"\nislands = 3\n[model]\nmax_tokens_total = 20000\n')
    c = resolve_run_config(f)
    assert (c.task, c.search.type, c.search.islands, c.model.max_tokens_total) == ("tasks/mpi/dot", "evolve", 3, 20000)


@pytest.mark.parametrize("text, sets, message", [
    ("task: x\nsearch:\n  beam_widht: 2\n", [], "search.beam_widht: Extra inputs are not permitted"),
    ("task: x\n", ["search.type=sideways"], "search.type: Input should be 'greedy', 'best-of-n', 'beam', 'tree' or 'evolve' (got 'sideways')"),
    ("task: x\n", ["search.max_candidates=0"], "search.max_candidates: Input should be greater than or equal to 1 (got 0)"),
    ("task: x\n", ["nonsense"], "--set 'nonsense': expected key.path=value"),
    ("task: x\n", ["task.deeper=1"], "task.deeper: task is a value, not a section"),
    ("- just\n- a list\n", [], "expected a mapping of settings at the top level"),
    ("task: [unclosed\n", [], "not valid YAML"),
    ("search:\n  type: beam\n", [], "task: Field required"),
])
def test_bad_config_is_one_line(tmp_path: Path, text: str, sets: list[str], message: str) -> None:
    f = tmp_path / "run.yaml"
    f.write_text(text)
    with pytest.raises(UserError) as e:
        resolve_run_config(f, None, sets)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_cli_saves_the_resolved_config(tmp_path: Path) -> None:
    f = tmp_path / "run.yaml"
    f.write_text(f"task: {SMALL_GEMM}\nsearch:\n  max_candidates: 5\n  patience: 1\n")
    runs = tmp_path / "runs"
    p = subprocess.run([sys.executable, "-m", "kernopt", "optimize", "--config", str(f), "--budget", "2", "--set", "search.batch=1",
                        "--sandbox", "local", "--runs-dir", str(runs), "--json"], capture_output=True, text=True, cwd=REPO, timeout=600)
    assert p.returncode == 0, p.stderr
    saved = json.loads(next(runs.glob("*/config.json")).read_text())
    assert saved["search"]["max_candidates"] == 2 and saved["search"]["batch"] == 1 and saved["search"]["patience"] == 1
    assert saved["sandbox"] == "local" and saved["task"] == str(SMALL_GEMM) and saved["model"]["name"]
    bad = subprocess.run([sys.executable, "-m", "kernopt", "optimize", "--config", str(f), "--set", "search.nope=1", "--sandbox", "local",
                          "--runs-dir", str(runs)], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "search.nope: Extra inputs are not permitted" in bad.stderr
    assert len(list(runs.iterdir())) == 1  # no run directory for a bad config
