"""Chaos: `kill -9` of `kernopt optimize` mid-run, then `--resume`: nothing re-evaluated, summary consistent."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

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

    # resuming a finished run evaluates nothing and reports the same result
    again = subprocess.run([sys.executable, "-m", "kernopt", "optimize", "--resume", str(run_dir), "--json"],
                           cwd=REPO, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and json.loads(again.stdout)["best_candidate"] == summary["best_candidate"]
    assert eval_ids(run_dir) == after
    reap_zombie_children()  # orphans of the killed run were reparented to this test process
