"""Shared fixtures: repository paths, a fast test task, and a guard that nothing is left running."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

# litellm fetches a price map from the network at import unless told not to: no test may depend on it
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
REPO = Path(__file__).resolve().parent.parent
SMALL_GEMM = REPO / "tests" / "data" / "small_gemm"

# The CLI's default sandbox is `auto` (docker, or an error without an engine). The suite's CLI and
# resume tests exercise the search and the run log, not containment, so their `kernopt` commands run
# in the local sandbox unless the environment says otherwise; tests/test_sandbox_docker.py covers docker.
os.environ.setdefault("KERNOPT_SANDBOX", "local")
# Hardware profiles that tests measure (`kernopt optimize`/`eval` on a task with a [roofline] table probe
# the machine once when nothing is cached) go to a directory of this session, never the user's cache.
if "KERNOPT_HW_CACHE" not in os.environ:
    os.environ["KERNOPT_HW_CACHE"] = _HW_CACHE = tempfile.mkdtemp(prefix="kernopt-test-hw-")
    atexit.register(shutil.rmtree, _HW_CACHE, True)


@pytest.fixture
def small_task(tmp_path: Path) -> Path:
    """A private copy of the fast gemm task that a test may modify."""
    dst = tmp_path / "small_gemm"
    shutil.copytree(SMALL_GEMM, dst)
    return dst


@pytest.fixture
def private_host_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A host lock of the test's own: tests that check results, not timings, must not queue behind the timing
    phases of other kernopt work on the machine (subprocesses inherit it too)."""
    monkeypatch.setenv("KERNOPT_HOST_LOCK", str(tmp_path / "host.lock"))


@pytest.fixture
def small_evaluator(small_task: Path) -> Iterator[object]:
    """A C-family evaluator of small_task, local sandbox, default settings."""
    from kernopt.config import EvalConfig
    from kernopt.evaluators.c_family.evaluator import CFamilyEvaluator
    from kernopt.sandbox import get_sandbox
    from kernopt.task import load_task
    with enterable_tmpdir("kernopt-test-ev-") as d:
        ev = CFamilyEvaluator(load_task(small_task), get_sandbox("local"), EvalConfig(), d / "ev")
        yield ev
        ev.close()


def needs(*tools: str) -> pytest.MarkDecorator:
    missing = [t for t in tools if shutil.which(t) is None]
    return pytest.mark.skipif(bool(missing), reason=f"needs {', '.join(missing)}")


def zombie_children() -> list[int]:
    """Zombies waiting for this process (the orchestrator is the sandbox's subreaper as root)."""
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == "Z" and int(fields[1]) == os.getpid():
            found.append(int(name))
    return found


def reap_zombie_children() -> None:
    """Reap zombies reparented to this (subreaper) test process, e.g. the sandboxed processes of a
    `kernopt` child the test killed with SIGKILL: a user's shell would leave them to init."""
    for pid in zombie_children():
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


@contextmanager
def enterable_tmpdir(prefix: str) -> Iterator[Path]:
    """A temporary directory that sandboxed programs can enter. Not pytest's tmp_path: that lives
    under a 0700 directory, and the local sandbox runs programs under a private uid (when root)."""
    d = Path(tempfile.mkdtemp(prefix=prefix))
    os.chmod(d, 0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def build_c_program(bins: Path, name: str, source: str) -> Path:
    """Compile `source` once into bins/name (a test program for the sandboxes)."""
    exe = bins / name
    if not exe.exists():
        src = bins / f"{name}.c"
        src.write_text(source)
        subprocess.run(["gcc", "-O1", "-pthread", "-o", str(exe), str(src)], check=True)
    return exe


def _gpu_available() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `gpu` need an NVIDIA GPU: skipped, with the reason, where there is none (CI)."""
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if gpu_items and not _gpu_available():
        skip = pytest.mark.skipif(True, reason="needs an NVIDIA GPU (nvidia-smi -L finds none)")
        for item in gpu_items:
            item.add_marker(skip)
