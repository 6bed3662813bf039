"""Showing what is happening (issue 19): the phase of each evaluation, whom a waiter waits for on the host
lock, the up-front estimate and the ETA (kernopt/estimate.py), the bench's per-task phase."""

from __future__ import annotations

import multiprocessing as mp
import os
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from kernopt import placement
from kernopt.candidate import Candidate
from kernopt.config import EvalConfig
from kernopt.estimate import estimate, eta_s, for_run
from kernopt.evaluators.c_family.evaluator import CFamilyEvaluator
from kernopt.sandbox import get_sandbox
from kernopt.task import load_task
from tests.conftest import SMALL_GEMM, enterable_tmpdir

PARALLEL_GEMM = """
void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    #pragma omp parallel for
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++) {
            double s = 0.0;
            for (long k = 0; k < n; k++) s += a[i * n + k] * b[k * n + j];
            c[i * n + j] = s;
        }
}
"""


def _hold_until(path: str, mode: str, what: str, held: mp.Event, release: mp.Event) -> None:  # type: ignore[type-arg]
    os.environ["KERNOPT_HOST_LOCK"] = path
    with placement.hold(mode, what=what):  # type: ignore[arg-type]
        held.set()
        release.wait(60)


@pytest.fixture
def holder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[mp.Process, mp.Event]]:  # type: ignore[type-arg]
    """Another process holding the host lock *shared* (as a build does) until told to release it."""
    path = str(tmp_path / "host.lock")
    monkeypatch.setenv("KERNOPT_HOST_LOCK", path)
    ctx = mp.get_context("fork")
    held, release = ctx.Event(), ctx.Event()
    p = ctx.Process(target=_hold_until, args=(path, "shared", "building other c0042", held, release))
    p.start()
    assert held.wait(10)
    yield p, release
    release.set()
    p.join(10)


def test_a_waiter_says_which_pid_holds_the_lock_and_for_what(holder: tuple[mp.Process, mp.Event]) -> None:  # type: ignore[type-arg]
    proc, release = holder
    seen: list[str] = []

    def on_wait(text: str) -> None:
        seen.append(text)
        if len(seen) >= 2:
            release.set()

    t0 = time.monotonic()
    with placement.hold("exclusive", what="timing mine", on_wait=on_wait):
        assert [h.mode for h in placement.holders()] == ["exclusive"]  # my own record replaced the other's
        assert placement.holders()[0].what == "timing mine"
    assert time.monotonic() - t0 >= 0.9  # it waited (about a second between reports)
    assert seen, "no wait phase reported"
    assert re.match(rf"waiting for the timing lock held by pid {proc.pid} \(building other c0042\) for \d+ s; waited \d+ s",
                    seen[0]), seen[0]
    assert placement.holders() == []  # records are removed on release


def test_no_wait_reported_when_the_lock_is_free(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNOPT_HOST_LOCK", str(tmp_path / "host.lock"))
    seen: list[str] = []
    with placement.hold("exclusive", what="x", on_wait=seen.append):
        pass
    assert seen == []


def test_records_of_dead_holders_are_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(tmp_path / "host.lock")
    monkeypatch.setenv("KERNOPT_HOST_LOCK", path)
    d = Path(path + ".holders")
    d.mkdir()
    p = mp.get_context("fork").Process(target=lambda: None)
    p.start()
    p.join()
    (d / f"{p.pid}-1").write_text(f'{{"pid": {p.pid}, "mode": "exclusive", "what": "gone", "since": 0}}')
    (d / "garbage").write_text("not json")
    assert placement.holders() == []


@pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("clang") is None, reason="needs gcc and clang")
def test_phases_of_a_real_evaluation_in_order(holder: tuple[mp.Process, mp.Event]) -> None:  # type: ignore[type-arg]
    """Build, verify at each thread count, race check, wait for the lock (held by another pid), timing rounds."""
    proc, release = holder
    phases: list[str] = []

    def on_phase(text: str) -> None:
        phases.append(text)
        if text.startswith("waiting") and sum(p.startswith("waiting") for p in phases) >= 2:
            release.set()  # the other process lets go once we have said whom we wait for

    task = load_task(SMALL_GEMM)
    with enterable_tmpdir("kernopt-progress-") as root:
        ev = CFamilyEvaluator(task, get_sandbox("local"), EvalConfig(rounds=2), root / "ev")
        ev.on_phase = on_phase
        try:
            r = ev.evaluate(Candidate(files={task.kernel: PARALLEL_GEMM}, idea="parallel i"))
        finally:
            ev.close()
    assert r.status == "ok", r.reason
    assert r.verification.race_check == "clean"

    def first(prefix: str) -> int:
        return next(i for i, p in enumerate(phases) if p.startswith(prefix))

    order = [first(p) for p in ("building", "verifying: the reference", "verifying at", "race check",
                                "waiting for the timing lock", "timing round 1/2", "timing round 2/2")]
    assert order == sorted(order), phases
    threads = {m.group(1) for p in phases if (m := re.match(r"verifying at n=[\d,]+ on (\d+) threads", p))}
    assert threads == {str(k) for k in task.verify.threads}, phases
    assert any(f"held by pid {proc.pid} (building other c0042)" in p for p in phases), phases
    assert r.phase_s.get("wait", 0.0) >= 1.0  # the wait is measured apart, as before


# ------------------------------------------------------------------ estimate and ETA (pure functions)
def test_estimate_before_and_after_the_baseline_is_timed() -> None:
    before = estimate(rounds=5, warmup=1, reps=2, candidates=20)
    assert (before.low_s, before.high_s) == pytest.approx((30 * 0.2 + 3.0, 30 * 2.0 + 3.0))  # 30 calls, 10 process starts
    assert "30 timed-size calls" in before.text and "not timed yet" in before.text and "20 candidates" in before.text
    assert "more if the machine is busy" in before.text
    after = estimate(rounds=5, warmup=1, reps=2, candidates=19, baseline_call_s=0.5, checking_s=7.0)
    assert after.low_s == after.high_s == pytest.approx(30 * 0.5 + 3.0 + 7.0)
    assert after.text.startswith("estimate: ~25 s per candidate, ~8 min for 19 more candidates")
    assert "0.5 s per call" in after.text and "7 s of building and checking" in after.text


def test_estimate_uses_the_tasks_settings_and_the_runs_overrides() -> None:
    task = load_task(SMALL_GEMM)  # rounds 5, warmup 1, reps 3
    e = for_run(task, None, None, 10, baseline_call_s=0.01)
    assert e is not None and "40 timed-size calls" in e.text
    e2 = for_run(task, 2, 1, 10, baseline_call_s=0.01)
    assert e2 is not None and "8 timed-size calls" in e2.text
    assert for_run(task, None, None, 0) is None


def test_eta_from_the_mean_of_finished_candidates() -> None:
    assert eta_s([], 20) is None  # nothing known
    assert eta_s([], 20, prior_s=30.0) == pytest.approx(600.0)  # the up-front estimate before any finished
    assert eta_s([], 20, current_s=10.0, prior_s=30.0) == pytest.approx(590.0)
    # candidates of 40-260 s: the mean, not the last 30 s
    assert eta_s([40.0, 260.0], 18, current_s=50.0, prior_s=30.0) == pytest.approx(100.0 + 150.0 * 17)
    assert eta_s([100.0], 3, current_s=500.0) == pytest.approx(200.0)  # a slow current one counts as done, not negative
    assert eta_s([100.0], 0) == 0.0


def test_progress_hooks_show_the_phase_the_estimate_and_an_eta() -> None:
    from kernopt.evaluators.result import EvalResult
    from kernopt.ui import ProgressHooks

    console = Console(record=True, width=200, force_terminal=False)
    hooks = ProgressHooks(console, budget=4)
    assert hooks.eta() is None
    hooks.on_estimate(30.0, "estimate: ~30 s per candidate")
    assert hooks.eta() == pytest.approx(120.0)
    c = Candidate(files={"k.c": ""}, idea="x")
    hooks.on_eval_start(c, 1, 4)
    hooks.on_phase("waiting for the timing lock held by pid 7 (timing y) for 3 s; waited 3 s")
    desc = hooks.progress.tasks[0].description
    assert f"{c.id}: waiting for the timing lock held by pid 7" in desc
    hooks._current = (c.id, time.monotonic() - 100.0)  # it took 100 s
    hooks.on_eval_done(c, EvalResult(candidate_id=c.id, status="compile_error", reason="x"), False, None)
    assert hooks.durations and hooks.durations[0] == pytest.approx(100.0, abs=1.0)
    assert hooks.eta() == pytest.approx(300.0, abs=3.0)  # the mean of what ran, not the estimate
    assert "estimate: ~30 s per candidate" in console.export_text()
    hooks.on_phase("re-measuring round 1/7: baseline, 1+2 calls at n=640")  # after the search: no candidate in progress
    assert "| re-measuring round 1/7" in hooks.progress.tasks[0].description


def test_bench_display_shows_a_tasks_phase() -> None:
    from kernopt.bench.work import ItemHooks, ProgressEvent
    from kernopt.ui import BenchProgress

    events: list[ProgressEvent] = []
    hooks = ItemHooks("openmp/gemm", 3, "host1", events.append)
    hooks.on_phase("timing round 2/5: candidate, 1+2 calls at n=640")
    assert events[-1].kind == "phase"
    display = BenchProgress(Console(width=200), 1, "b")
    display.on_event(ProgressEvent(key="openmp/gemm", kind="start", budget=3))
    display.on_event(events[-1])
    desc = display.progress.tasks[display.lines["openmp/gemm"]].description
    assert "now: timing round 2/5" in desc


def test_a_long_phase_never_hides_the_counts_elapsed_and_eta() -> None:
    from io import StringIO

    from kernopt.ui import ProgressHooks

    hooks = ProgressHooks(Console(file=StringIO(), width=100), budget=4)
    hooks.on_estimate(30.0, "estimate")
    hooks.on_eval_start(Candidate(files={"k.c": ""}, idea="x"), 1, 4)
    hooks.on_phase("waiting for the timing lock (to build and check) held by pid 16863 (timing gemm 5a8321f8ad8b) "
                   "for 13 s; waited 13 s")
    out = Console(file=StringIO(), width=100, record=True)
    out.print(hooks.progress.make_tasks_table(hooks.progress.tasks))
    line = out.export_text().rstrip("\n")
    assert "\n" not in line and "0/4 0:00:00 ETA ~2 min best none yet" in line and line.endswith("…")


def test_holder_records_are_read_and_written_defensively(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Anyone can write into the records directory: control codes are dropped, a FIFO does not block the reader,
    a link is never written through."""
    path = str(tmp_path / "host.lock")
    monkeypatch.setenv("KERNOPT_HOST_LOCK", path)
    d = Path(path + ".holders")
    d.mkdir()
    (d / "evil").write_text(f'{{"pid": {os.getpid()}, "mode": "exclusive", "what": "x\\u001b[2Jy", "since": 0}}')
    os.mkfifo(d / "fifo")
    assert [h.what for h in placement.holders()] == ["x[2Jy"]
    target = tmp_path / "victim"
    target.write_text("keep")
    import threading

    (d / f"{os.getpid()}-{threading.get_ident()}.tmp").symlink_to(target)
    with placement.hold("exclusive", what="mine"):
        assert "mine" in [h.what for h in placement.holders()]
    assert target.read_text() == "keep"
    link = tmp_path / "linked.lock"
    Path(str(link) + ".holders").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.setenv("KERNOPT_HOST_LOCK", str(link))
    with placement.hold("exclusive", what="mine"):
        pass
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_bench_eta_from_the_mean_task_and_the_tasks_running_at_once() -> None:
    from kernopt.estimate import bench_eta_s

    assert bench_eta_s([], 5, 2) is None
    assert bench_eta_s([100.0, 300.0], 4, 2) == pytest.approx(400.0)
    assert bench_eta_s([100.0], 3, 0) == pytest.approx(300.0)
    assert bench_eta_s([100.0], 0, 2) == 0.0


def test_bench_display_shows_an_eta_once_a_task_has_finished() -> None:
    from types import SimpleNamespace

    from kernopt.bench.work import ProgressEvent
    from kernopt.ui import BenchProgress

    display = BenchProgress(Console(width=200), 3, "b")
    assert display.progress.tasks[display.overall].fields["eta"] == "ETA -:--:--"
    for key in ("a", "b"):
        display.on_event(ProgressEvent(key=key, kind="start", budget=3))
    display.on_result(SimpleNamespace(key="a", status="failed", error="x", elapsed_s=600.0, host="", summary=None))
    assert display.progress.tasks[display.overall].fields["eta"] == "ETA ~20 min"  # 2 left, 1 running: 2 x 600 s
