"""`kernopt doctor` and the preflight of optimize/eval/bench: each gate proven live on the built-in
doctor task with the real tools, and a dead one named with its fix, fail closed."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernopt import doctor
from kernopt.config import EvalConfig
from kernopt.errors import UserError
from kernopt.sandbox import get_sandbox
from kernopt.task import load_task
from tests.conftest import REPO, enterable_tmpdir

needs_tools = pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("clang") is None, reason="needs gcc and clang")


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # the doctor's cache under ~/.cache/kernopt/doctor


@pytest.fixture(scope="module")
def clang_without_tsan_runtime() -> Iterator[Path]:
    """A clang whose resource directory has its headers but not its runtime libraries: what a machine
    without libclang-rt-14-dev has."""
    with enterable_tmpdir("kernopt-doctor-clang-") as d:
        real = subprocess.run(["clang", "-print-resource-dir"], capture_output=True, text=True, check=True).stdout.strip()
        (d / "resource").mkdir()
        (d / "resource" / "include").symlink_to(Path(real) / "include")
        wrapper = d / "clang-no-tsan"
        wrapper.write_text(f'#!/bin/sh\nexec clang -resource-dir={d / "resource"} "$@"\n')
        wrapper.chmod(0o755)
        yield wrapper


@needs_tools
def test_every_gate_is_live_here_and_a_pass_is_cached(tmp_path: Path) -> None:
    sb = get_sandbox("local")
    checks = doctor.run(sb)
    assert [(c.name, c.ok) for c in checks] == [("build", True), ("race", True), ("mpi", True)], checks
    cached = list((tmp_path / ".cache" / "kernopt" / "doctor").glob("*.json"))
    assert len(cached) == 3
    race = next(p for p in cached if p.name.endswith("-race.json"))
    race.write_text(json.dumps({"name": "race", "ok": True, "detail": "from the cache", "fix": ""}))
    assert doctor.run(sb, ["race"])[0].detail == "from the cache"
    assert doctor.run(sb, ["race"], fresh=True)[0].detail != "from the cache"


@needs_tools
def test_a_missing_sanitizer_runtime_is_named_and_stops_the_preflight(clang_without_tsan_runtime: Path) -> None:
    sb = get_sandbox("local")
    config = EvalConfig(race_compiler=str(clang_without_tsan_runtime))
    (race,) = doctor.run(sb, ["race"], config=config)
    assert not race.ok and "libclang-rt-14-dev" in race.fix, race
    task = load_task(REPO / "tasks" / "openmp" / "reduction")
    with pytest.raises(UserError, match="race gate is not live.*libclang-rt-14-dev.*--no-race-check"):
        doctor.preflight(sb, task, config)
    assert not list(Path.home().glob(".cache/kernopt/doctor/*race.json"))  # a failure is never cached
    doctor.preflight(sb, task, config.model_copy(update={"race_check": False}))  # opted out: the race gate is not needed


def test_which_gates_a_task_needs() -> None:
    openmp, mpi, serial = (load_task(REPO / "tasks" / t) for t in ("openmp/gemm", "mpi/dot", "openmp/reduction"))
    assert doctor.needed(openmp, True) == ["build", "race"]
    assert doctor.needed(openmp, False) == ["build"]
    assert doctor.needed(mpi, True) == ["build", "mpi"]
    assert doctor.needed(load_task(REPO / "tasks" / "triton" / "vector_add"), True) == []
    assert serial.uses_openmp


@needs_tools
def test_cli_prints_one_line_per_gate() -> None:
    r = subprocess.run([str(REPO / ".venv" / "bin" / "kernopt"), "doctor", "--sandbox", "local", "--json"], capture_output=True,
                       text=True, timeout=300)
    if r.returncode == 2 and "No such file" in r.stderr:
        pytest.skip("no .venv/bin/kernopt")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["sandbox"] == "local" and {c["name"]: c["ok"] for c in report["checks"]} == {"build": True, "race": True, "mpi": True}
