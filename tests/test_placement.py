"""The host lock (kernopt/placement.py): timing is exclusive, building and checking are shared, a waiting
timer is not starved, and evaluators really hold it. Real processes, real flock."""

from __future__ import annotations

import multiprocessing as mp
import time
from pathlib import Path

import pytest

from kernopt import placement


def _hold(path: str, mode: str, seconds: float, log: mp.Queue, name: str, delay: float = 0.0) -> None:
    import os

    os.environ["KERNOPT_HOST_LOCK"] = path
    time.sleep(delay)
    with placement.hold(mode):  # type: ignore[arg-type]
        log.put((name, "in", time.monotonic()))
        time.sleep(seconds)
        log.put((name, "out", time.monotonic()))


def _run(path: Path, specs: list[tuple[str, str, float, float]]) -> dict[tuple[str, str], float]:
    ctx = mp.get_context("fork")
    q: mp.Queue = ctx.Queue()
    procs = [ctx.Process(target=_hold, args=(str(path), mode, secs, q, name, delay)) for name, mode, secs, delay in specs]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    out = {}
    while not q.empty():
        name, what, t = q.get()
        out[(name, what)] = t
    return out


def test_shared_holders_overlap_and_exclusive_waits_for_them(tmp_path: Path) -> None:
    t = _run(tmp_path / "host.lock", [("a", "shared", 0.6, 0.0), ("b", "shared", 0.6, 0.1), ("x", "exclusive", 0.3, 0.2)])
    assert t[("b", "in")] < t[("a", "out")]  # two builds side by side
    assert t[("x", "in")] >= max(t[("a", "out")], t[("b", "out")])  # the timer waits for both


def test_a_waiting_timer_blocks_new_shared_holders(tmp_path: Path) -> None:
    # a holds shared; x asks for exclusive; c asks for shared after x: c must not overtake x.
    t = _run(tmp_path / "host.lock", [("a", "shared", 0.6, 0.0), ("x", "exclusive", 0.4, 0.15), ("c", "shared", 0.1, 0.3)])
    assert t[("x", "in")] >= t[("a", "out")]
    assert t[("c", "in")] >= t[("x", "out")]


def test_exclusive_excludes_exclusive(tmp_path: Path) -> None:
    t = _run(tmp_path / "host.lock", [("x", "exclusive", 0.4, 0.0), ("y", "exclusive", 0.1, 0.1)])
    assert t[("y", "in")] >= t[("x", "out")]


def test_off_and_nesting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNOPT_HOST_LOCK", "off")
    assert placement.lock_path() is None
    with placement.hold("exclusive"):
        pass
    monkeypatch.setenv("KERNOPT_HOST_LOCK", str(tmp_path / "host.lock"))
    waited: dict[str, float] = {}
    with placement.hold("exclusive", waited), placement.hold("shared"):  # shared inside exclusive: already held
        pass
    assert "wait" in waited
    with placement.hold("shared"), pytest.raises(RuntimeError), placement.hold("exclusive"):
        pass


def test_a_killed_holder_releases_the_lock(tmp_path: Path) -> None:
    ctx = mp.get_context("fork")
    q: mp.Queue = ctx.Queue()
    p = ctx.Process(target=_hold, args=(str(tmp_path / "host.lock"), "exclusive", 60.0, q, "k"))
    p.start()
    q.get(timeout=10)  # it holds the lock
    p.kill()
    p.join()
    t0 = time.monotonic()
    import os

    os.environ["KERNOPT_HOST_LOCK"] = str(tmp_path / "host.lock")
    try:
        with placement.hold("exclusive"):
            pass
    finally:
        del os.environ["KERNOPT_HOST_LOCK"]
    assert time.monotonic() - t0 < 5


@pytest.mark.slow
def test_the_evaluator_times_only_when_no_one_else_holds_the_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While another process holds the lock exclusively, an evaluation builds and verifies (its shared
    hold waits too: the holder might be timing) and its timing starts only after the holder lets go."""
    from conftest import REPO, enterable_tmpdir

    from kernopt.candidate import Candidate
    from kernopt.config import EvalConfig
    from kernopt.evaluators import get_evaluator
    from kernopt.sandbox import get_sandbox
    from kernopt.task import load_task

    lock = tmp_path / "host.lock"
    monkeypatch.setenv("KERNOPT_HOST_LOCK", str(lock))
    ctx = mp.get_context("fork")
    q: mp.Queue = ctx.Queue()
    holder = ctx.Process(target=_hold, args=(str(lock), "exclusive", 3.0, q, "timer"))
    holder.start()
    q.get(timeout=10)
    task = load_task(REPO / "tests" / "data" / "small_reduction")
    with enterable_tmpdir("kernopt-placement-") as work:
        ev = get_evaluator(task, get_sandbox("local", task.target), EvalConfig(rounds=3, race_check=False), work)
        try:
            r = ev.evaluate(Candidate(files={task.kernel: task.baseline_source()}))
        finally:
            ev.close()
    holder.join(10)
    assert r.status == "ok", r.reason
    assert r.phase_s["wait"] >= 1.5, r.phase_s  # it waited for the holder
    assert q.get(timeout=1)[1] == "out"
