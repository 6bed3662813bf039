"""The CLI end to end, in subprocesses: bad input ends in one clear line and a non-zero exit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, needs


def kernopt(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kernopt", *args], capture_output=True, text=True, cwd=cwd or REPO,
                          env={**os.environ, **(env or {})}, timeout=600)


def one_error_line(p: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    assert "Traceback" not in p.stderr
    return lines[0]


def test_help_is_fast_and_lists_commands() -> None:
    p = kernopt("--help")
    assert p.returncode == 0
    for cmd in ("optimize", "eval", "task", "runs"):
        assert cmd in p.stdout


def test_missing_task_toml(tmp_path: Path) -> None:
    p = kernopt("optimize", str(tmp_path))
    assert p.returncode == 2
    assert "no task.toml" in one_error_line(p)


def test_wrong_target(small_task: Path) -> None:
    toml = small_task / "task.toml"
    toml.write_text(toml.read_text().replace('target = "openmp"', 'target = "cobol"'))
    p = kernopt("task", "check", str(small_task))
    assert p.returncode == 2
    assert "unknown target 'cobol'" in one_error_line(p)


def test_missing_compiler(small_task: Path) -> None:
    toml = small_task / "task.toml"
    toml.write_text(toml.read_text().replace("[timing]", '[build]\ncc = "no-such-cc-9"\n\n[timing]'))
    p = kernopt("eval", str(small_task), "--candidate", str(small_task / "kernel.c"))
    assert p.returncode == 2
    assert "no-such-cc-9 not found" in one_error_line(p)


def test_unreadable_and_unknown_run_directory(tmp_path: Path) -> None:
    p = kernopt("runs", "show", "no-such-run", "--runs-dir", str(tmp_path))
    assert p.returncode == 2
    assert "no run 'no-such-run'" in one_error_line(p)
    (tmp_path / "broken").mkdir()
    p = kernopt("optimize", "--resume", str(tmp_path / "broken"))
    assert p.returncode == 2
    assert "not a kernopt run directory" in one_error_line(p)
    (tmp_path / "broken" / "config.json").write_text("{not json")
    p = kernopt("runs", "show", str(tmp_path / "broken"))
    assert p.returncode == 2
    assert "config.json is unreadable or invalid" in one_error_line(p)


def test_missing_candidate_file(small_task: Path) -> None:
    p = kernopt("eval", str(small_task), "--candidate", "/nonexistent/k.c")
    assert p.returncode == 2
    assert "no such file" in one_error_line(p)


def test_bad_search_option(small_task: Path, tmp_path: Path) -> None:
    p = kernopt("optimize", str(small_task), "--search", "annealing", "--runs-dir", str(tmp_path))
    assert p.returncode == 2
    assert "annealing" in one_error_line(p)


@needs("gcc")
def test_eval_json_compile_error(small_task: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.c"
    bad.write_text("void gemm(long n, const double *a, const double *b, double *c) { this is not C; }\n")
    p = kernopt("eval", str(small_task), "--candidate", str(bad), "--json")
    assert p.returncode == 1, p.stderr  # a failed verdict never exits 0 (`eval ... && deploy`)
    out = json.loads(p.stdout)
    assert out["status"] == "compile_error" and out["speedup"] is None
    assert "does not compile" in out["reason"] and "error" in out["reason"]


@needs("gcc", "clang")
def test_eval_json_ok_on_baseline(small_task: Path) -> None:
    p = kernopt("eval", str(small_task), "--candidate", str(small_task / "kernel.c"), "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["status"] == "ok" and out["speedup"] > 0
    assert out["verification"]["seeds"] >= 5 and out["verification"]["threads"] == [1, 2, 3, 4]
    assert len(out["verification"]["sizes"]) >= 3


@needs("gcc")
def test_task_check_reports_input_independent_output(small_task: Path) -> None:
    kernel = small_task / "kernel.c"
    kernel.write_text(kernel.read_text().replace("c[i * n + j] = s;", "c[i * n + j] = (double)(i + j);"))
    p = kernopt("task", "check", str(small_task))
    assert p.returncode == 1
    assert "does not depend on its inputs" in p.stdout + p.stderr


def test_unwritable_runs_dir_is_one_line(small_task: Path) -> None:
    # /proc exists but not even root can create a directory in it (the tests run as root)
    p = kernopt("optimize", str(small_task), "--runs-dir", "/proc", "--sandbox", "local", "--budget", "1")
    assert p.returncode == 2, p.stderr
    assert "cannot create a run directory in /proc" in one_error_line(p)


@needs("gcc")
def test_broken_baseline_is_a_user_error_before_any_run(small_task: Path, tmp_path: Path) -> None:
    kernel = small_task / "kernel.c"
    good = tmp_path / "good.c"
    good.write_text(kernel.read_text())
    kernel.write_text(kernel.read_text().replace("c[i * n + j] = s;", "c[i * n + j] = s oops;"))
    runs = tmp_path / "runs"
    p = kernopt("optimize", str(small_task), "--sandbox", "local", "--runs-dir", str(runs), "--budget", "1")
    assert p.returncode == 2, p.stderr
    line = one_error_line(p)
    assert "baseline fails to build" in line and "error:" in line and "oops" in line and "--resume" not in line
    assert not runs.exists() or not any(runs.iterdir()), "a run directory was created for a task that cannot run"
    p = kernopt("eval", str(small_task), "--candidate", str(good), "--sandbox", "local", "--json")
    assert p.returncode == 2, p.stderr
    assert "oops" in one_error_line(p)
    out = json.loads(p.stdout)  # --json always prints an object, even for an error
    assert out["status"] == "user_error" and "oops" in out["error"] and out["speedup"] is None


@needs("gcc")
def test_broken_harness_is_a_user_error_with_the_compiler_line(small_task: Path, tmp_path: Path) -> None:
    harness = small_task / "harness.c"
    harness.write_text(harness.read_text() + "\nint broken_harness = ;\n")
    runs = tmp_path / "runs"
    p = kernopt("optimize", str(small_task), "--sandbox", "local", "--runs-dir", str(runs), "--budget", "1")
    assert p.returncode == 2, p.stderr
    line = one_error_line(p)
    assert "harness does not build" in line and "error:" in line
    assert not runs.exists() or not any(runs.iterdir())


def test_eval_json_prints_an_object_on_a_user_error(small_task: Path) -> None:
    p = kernopt("eval", str(small_task), "--candidate", "/nonexistent/k.c", "--json")
    assert p.returncode == 2
    assert json.loads(p.stdout)["status"] == "user_error"


def test_llm_bad_model_or_missing_key_before_any_run(small_task: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    runs = tmp_path / "runs"

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "kernopt", "optimize", str(small_task), "--policy", "llm", "--sandbox", "local",
                               "--runs-dir", str(runs), "--budget", "1", *args], capture_output=True, text=True, cwd=REPO, env=env,
                              timeout=300)

    p = run("--model", "opnai/gpt-4o-mini")
    assert p.returncode == 2, p.stderr
    line = one_error_line(p)
    assert "opnai/gpt-4o-mini" in line and "provider" in line and "--resume" not in line
    p = run("--model", "openai/gpt-4o-mini")
    assert p.returncode == 2, p.stderr
    assert "needs OPENAI_API_KEY" in one_error_line(p)
    p = run("--model", "anthropic/claude-3-5-sonnet", "--set", "model.api_key_env=MY_KEY_VAR")
    assert p.returncode == 2, p.stderr
    assert "MY_KEY_VAR" in one_error_line(p)
    assert not runs.exists() or not any(runs.iterdir()), "a run directory was created for a run that cannot call its model"


def test_check_model_lets_keyless_local_servers_through(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernopt.config import ModelConfig
    from kernopt.model import check_model

    for k in [k for k in os.environ if k.endswith("_API_KEY")]:
        monkeypatch.delenv(k)
    check_model(ModelConfig(name="hosted_vllm/Qwen2.5-Coder", api_base="http://127.0.0.1:9/v1"))
    check_model(ModelConfig(name="ollama/qwen2.5-coder:14b", api_base="http://127.0.0.1:11434"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-a-key")
    check_model(ModelConfig(name="openai/scripted", api_base="http://127.0.0.1:9/v1"))  # tests/test_llm_run.py's setup


def test_bench_llm_bad_model_before_any_bench_directory(small_task: Path, tmp_path: Path) -> None:
    p = kernopt("bench", str(small_task), "--policy", "llm", "--model", "opnai/gpt-4o-mini", "--sandbox", "local",
                "--benches-dir", str(tmp_path / "benches"))
    assert p.returncode == 2, p.stderr
    assert "opnai/gpt-4o-mini" in one_error_line(p)
    assert not (tmp_path / "benches").exists()
