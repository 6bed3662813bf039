"""Chaos: `kill -9` of `kernopt optimize` mid-run, then `--resume`: nothing re-evaluated, summary consistent."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, needs, reap_zombie_children


def eval_ids(run_dir: Path) -> list[str]:
    ids = []
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        try:
            ev = json.loads(line)
        except json.JSONDecodeError:
            continue
        if ev["type"] == "eval":
            ids.append(ev["result"]["candidate_id"])
    return ids


@needs("gcc", "clang")
def test_kill_and_resume(small_task: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    budget = 7
    proc = subprocess.Popen([sys.executable, "-m", "kernopt", "optimize", str(small_task), "--budget", str(budget),
                             "--runs-dir", str(runs)], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 300
    run_dir: Path | None = None
    while time.monotonic() < deadline:
        dirs = list(runs.glob("*")) if runs.exists() else []
        if dirs and (dirs[0] / "events.jsonl").exists() and len(eval_ids(dirs[0])) >= 3:
            run_dir = dirs[0]
            break
        assert proc.poll() is None, "optimize ended before it could be killed"
        time.sleep(0.05)
    assert run_dir is not None, "no progress within the deadline"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = eval_ids(run_dir)
    assert 3 <= len(before) < budget
    assert not (run_dir / "summary.json").exists() or json.loads((run_dir / "summary.json").read_text()).get("status") != "finished"

    listed = subprocess.run([sys.executable, "-m", "kernopt", "runs", "list", "--runs-dir", str(runs)],
                            cwd=REPO, capture_output=True, text=True, timeout=60)
    assert "incomplete" in listed.stdout

    p = subprocess.run([sys.executable, "-m", "kernopt", "optimize", "--resume", str(run_dir), "--json"],
                       cwd=REPO, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    after = eval_ids(run_dir)
    assert after[: len(before)] == before, "the log was rewritten"
    assert len(after) == len(set(after)), "a logged candidate was evaluated again"
    assert len(after) == budget == summary["candidates"]
    assert sum(summary["statuses"].values()) == budget
    assert summary["status"] == "finished" and summary["run_dir"] == str(run_dir)
    on_disk = json.loads((run_dir / "summary.json").read_text())
    assert on_disk["candidates"] == budget and on_disk["best_candidate"] == summary["best_candidate"]
    types = [json.loads(ln)["type"] for ln in (run_dir / "events.jsonl").read_text().splitlines() if ln.startswith("{")]
    assert types[0] == "start" and "resume" in types and types[-1] == "end"
    # best/BUILD: its compile line builds the best kernel where it lies, and is the summary's
    build = (run_dir / "best" / "BUILD").read_text().splitlines()
    assert build[1] == summary["best_build"] and build[1].endswith("-c kernel.c -o kernel.o")
    assert subprocess.run(["sh", "-c", build[1]], cwd=run_dir / "best", capture_output=True, timeout=120).returncode == 0
    assert (run_dir / "best" / "kernel.o").stat().st_size > 0 and build[3].startswith("# ran as: OMP_NUM_THREADS=")

    # resuming a finished run evaluates nothing and reports the same result
    again = subprocess.run([sys.executable, "-m", "kernopt", "optimize", "--resume", str(run_dir), "--json"],
                           cwd=REPO, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and json.loads(again.stdout)["best_candidate"] == summary["best_candidate"]
    assert eval_ids(run_dir) == after
    reap_zombie_children()  # orphans of the killed run were reparented to this test process


@pytest.mark.slow
@needs("gcc", "clang")
def test_resume_restores_model_spend(tmp_path: Path) -> None:
    """The spend logged before a kill counts on resume: `--max-usd` is one budget for the whole run, not
    one per resume (without the restore, the resumed run starts from $0 and spends the budget again)."""
    from llm_server import serve

    gemm = REPO / "tasks" / "openmp" / "gemm"
    env = os.environ | {"OPENAI_API_KEY": "sk-scripted-not-a-key", "KERNOPT_SANDBOX": "local"}
    # above what the first step costs (plan, execute, critique: ~$0.0007 with the machine, tolerance and gate lines
    # in the prompts), far below the whole scenario (~$0.003)
    runs, max_usd = tmp_path / "runs", 0.0012
    with serve("gemm_improves.yaml") as server:  # a priced name (litellm's prices for gpt-4o-mini), scripted answers
        child = subprocess.Popen([sys.executable, "-m", "kernopt", "optimize", str(gemm), "--policy", "llm",
                                  "--model", "openai/gpt-4o-mini", "--api-base", server.api_base, "--budget", "6",
                                  "--sandbox", "local", "--runs-dir", str(runs), "--max-usd", str(max_usd), "--json"],
                                 env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 start_new_session=True)
        try:
            deadline, run_dir = time.monotonic() + 300, None
            while time.monotonic() < deadline:  # kill during the first evaluation: model calls paid, none in flight
                logs = list(runs.glob("*/events.jsonl"))
                if logs and len(eval_ids(logs[0].parent)) >= 1:
                    run_dir = logs[0].parent
                    break
                assert child.poll() is None, "optimize ended before it could be killed"
                time.sleep(0.1)
            assert run_dir is not None, "no evaluation within the deadline"
        finally:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            reap_zombie_children()
        spent_before = logged_usd(run_dir)
        assert 0 < spent_before < max_usd, "the kill came after the budget was used: the test proves nothing"
        p = subprocess.run([sys.executable, "-m", "kernopt", "optimize", "--resume", str(run_dir), "--json"], env=env,
                           cwd=REPO, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    s = json.loads(p.stdout)
    total = logged_usd(run_dir)
    # the resumed run's spend starts from what the log says was spent, so the one budget stops it
    assert s["spend"]["usd"] >= spent_before and abs(s["spend"]["usd"] - total) < 1e-9
    assert s["stopped_by"].startswith("model budget used") and "max_usd" in s["stopped_by"]
    assert max_usd <= total < max_usd + 0.001  # stopped at the limit, not a second budget after the resume


def logged_usd(run_dir: Path) -> float:
    """The run's model spend as its log records it: every paid (not cached) answer's cost."""
    total = 0.0
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        try:
            ev = json.loads(line)
        except json.JSONDecodeError:
            continue
        if ev.get("type") == "llm" and ev.get("completion") and not ev["completion"].get("cached"):
            total += ev["completion"]["cost_usd"]
    return total


def wait_for_evals(runs: Path, proc: subprocess.Popen[str], n: int, timeout: float = 300) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        dirs = list(runs.glob("*")) if runs.exists() else []
        if dirs and (dirs[0] / "events.jsonl").exists() and len(eval_ids(dirs[0])) >= n:
            return dirs[0]
        assert proc.poll() is None, "optimize ended too early"
        time.sleep(0.05)
    raise AssertionError("no progress within the deadline")


@needs("gcc", "clang")
def test_sigterm_is_like_ctrl_c(small_task: Path, tmp_path: Path) -> None:
    """SIGTERM (kill, a batch system's time limit) ends the run with the resume hint and exit 143, its log intact."""
    runs = tmp_path / "runs"
    proc = subprocess.Popen([sys.executable, "-m", "kernopt", "optimize", str(small_task), "--budget", "6", "--sandbox", "local",
                             "--runs-dir", str(runs)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        run_dir = wait_for_evals(runs, proc, 1)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        reap_zombie_children()
    assert proc.returncode == 143, stderr[-3000:]
    assert f"kernopt optimize --resume {run_dir}" in stderr and "Traceback" not in stderr
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    assert lines and all(json.loads(ln) for ln in lines)  # no torn line: the log was left consistent
    assert not (run_dir / "summary.json").exists()


@needs("gcc", "clang")
def test_resume_extends_a_finished_run_and_refuses_other_changes(small_task: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"

    def optimize(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "kernopt", "optimize", *args], cwd=REPO, capture_output=True, text=True,
                              timeout=600)

    p = optimize(str(small_task), "--budget", "2", "--sandbox", "local", "--runs-dir", str(runs), "--json")
    assert p.returncode == 0, p.stderr[-3000:]
    run_dir = Path(json.loads(p.stdout)["run_dir"])
    before = eval_ids(run_dir)
    assert len(before) == 2
    config_before = (run_dir / "config.json").read_text()

    p = optimize("--resume", str(run_dir), "--search", "beam")  # not a limit: refused, nothing changed
    assert p.returncode == 2
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "search.type" in lines[0] and "--budget" in lines[0], p.stderr
    p = optimize("--resume", str(run_dir), "--set", "search.patience=9")
    assert p.returncode == 2 and "search.patience" in p.stderr
    assert (run_dir / "config.json").read_text() == config_before and eval_ids(run_dir) == before

    p = optimize("--resume", str(run_dir), "--budget", "4", "--sandbox", "local", "--json")
    assert p.returncode == 0, p.stderr[-3000:]
    summary = json.loads(p.stdout)
    after = eval_ids(run_dir)
    assert after[:2] == before, "the log was rewritten"
    assert len(after) == len(set(after)), "a logged candidate was evaluated again"
    assert 2 < len(after) <= 4 and summary["candidates"] == len(after) and summary["status"] == "finished"
    assert json.loads((run_dir / "config.json").read_text())["search"]["max_candidates"] == 4
    types = [json.loads(ln)["type"] for ln in (run_dir / "events.jsonl").read_text().splitlines()]
    assert "config" in types and types[-1] == "end"

    p = optimize("--resume", str(run_dir), "--budget", "4")  # the same limit again: finished, nothing to do
    assert p.returncode == 0 and "already finished" in p.stderr and eval_ids(run_dir) == after


def test_a_term_python_dropped_is_raised_again_at_the_next_checkpoint(capsys: pytest.CaptureFixture[str]) -> None:
    """Python drops an exception raised in a fork handler or a finalizer ("Exception ignored in ..."): a SIGTERM that
    lands there must still end the run, at the next evaluation or message, and print no traceback (seen in CI: a
    TERM during a sandbox process's start went unnoticed and the run ended 0)."""
    import gc

    from kernopt.cli import Terminated, TermSignal

    term = TermSignal()

    class Finalized:
        def __del__(self) -> None:
            term.handler(signal.SIGTERM, None)

    previous = signal.getsignal(signal.SIGTERM)
    hook = sys.unraisablehook
    sys.unraisablehook = term.unraisable
    try:
        Finalized()  # the handler runs in __del__: its Terminated is dropped
        gc.collect()
        assert term.pending
        with pytest.raises(Terminated):
            term.checkpoint()
        term.checkpoint()  # once only
    finally:
        sys.unraisablehook = hook
        signal.signal(signal.SIGTERM, previous)
    assert "Traceback" not in capsys.readouterr().err


def test_the_term_hook_passes_other_exceptions_to_the_hook_before_it() -> None:
    from kernopt.cli import TermSignal

    seen: list[object] = []
    hook = sys.unraisablehook
    sys.unraisablehook = seen.append
    try:
        term = TermSignal()  # takes the hook in place now as the one before it
        term.unraisable(type("Info", (), {"exc_value": ValueError("x")})())
    finally:
        sys.unraisablehook = hook
    assert len(seen) == 1
