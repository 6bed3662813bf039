"""Red-team suite, issue 26: hostile kernels against the race check (ThreadSanitizer) and its run.

Every kernel under tests/redteam_race/ tries one attack; its header says which, what it got against main
(e2530a1) and the expected defence. Under the local and (when an engine answers) the docker sandbox:

- evaluate() returns a verdict, never raises;
- a racy kernel (rr01-rr11, rr13, rr14) never ends `ok`, however it hides its race from the sanitizer
  (it tests for the sanitizer's heap, symbols, environment, timing or missing filter; it silences or
  blinds the sanitizer; it stores through a library call);
- no host data in any output: neither the planted sentinels (this process's environment, the world-readable
  /tmp/kernopt-redteam-sentinel), nor /etc/passwd, nor the measured program's own environment, nor the
  text a forged sanitizer report copies in, in the reason, the log or verification.race_detail (rr12);
- nothing the kernel wrote outside its work directory survives the run (rr12), and nothing is left under
  the evaluator's workroot after close() (rr16-rr18: a deep directory chain, mode-000 directories, 200k files);
- an MPI rank cannot read or write its launcher's memory (rr15: its result says what it could do).

rr00 is the control: the same racy reduction with no trick is found by the sanitizer.
Docker cases skip without an engine unless KERNOPT_REQUIRE_DOCKER=1.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kernopt.candidate import Candidate
from kernopt.config import EvalConfig
from kernopt.errors import UserError
from kernopt.evaluators.c_family.evaluator import CFamilyEvaluator
from kernopt.evaluators.result import EvalResult
from kernopt.sandbox import Sandbox, get_sandbox
from kernopt.task import Task, load_task
from tests.conftest import enterable_tmpdir

REPO = Path(__file__).resolve().parent.parent
KERNELS = Path(__file__).resolve().parent / "redteam_race"
REDUCTION = REPO / "tests" / "data" / "small_reduction"  # result = sum x[i] * y[i], race size 1000
SMALL_DOT = REPO / "tests" / "redteam" / "small_dot"  # tasks/mpi/dot with a small timed size
SENTINEL_FILE = Path("/tmp/kernopt-redteam-sentinel")  # the path rr12 reads (tests/test_redteam.py plants it too)
LEFTOVERS = (Path("/run/lock/kernopt-redteam-race-leftover"), Path("/tmp/kernopt-redteam-race-leftover"))  # rr12 writes them
CONFIG = {"rounds": 3, "race_threads": [2, 4], "race_threads_o0": []}
BOTH = ("local", "docker")

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("clang") is None or shutil.which("mpicc") is None,
                                reason="needs gcc, clang and mpicc")


def kernel(name: str) -> str:
    return (KERNELS / name).read_text()


# ---------------------------------------------------------------- fixtures
@dataclass(frozen=True)
class Secrets:
    env: str  # planted in this process's environment (the orchestrator's)
    file: str  # the content of SENTINEL_FILE


@pytest.fixture(scope="session")
def planted() -> Iterator[Secrets]:
    """The sentinels. Shares them with tests/test_redteam.py's fixture when that one planted first (same
    variable, same file): the file is left alone and its content looked for."""
    env = os.environ.get("KERNOPT_REDTEAM_SECRET") or "krtenv" + secrets.token_hex(10)
    set_env = "KERNOPT_REDTEAM_SECRET" not in os.environ
    os.environ["KERNOPT_REDTEAM_SECRET"] = env
    created = not SENTINEL_FILE.exists()
    if created:
        SENTINEL_FILE.write_text("krtfil" + secrets.token_hex(10))
        SENTINEL_FILE.chmod(0o644)
    s = Secrets(env=env, file=SENTINEL_FILE.read_text(errors="replace"))
    try:
        yield s
    finally:
        if set_env:
            os.environ.pop("KERNOPT_REDTEAM_SECRET", None)
        if created:
            SENTINEL_FILE.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def workroot() -> Iterator[Path]:
    with enterable_tmpdir("kernopt-redteam-race-") as d:
        yield d


def sandbox_for(name: str, target: str) -> Sandbox:
    if name == "local":
        return get_sandbox("local")
    try:
        from kernopt.sandbox.docker import connect

        connect(timeout_s=10)
    except UserError as e:
        if os.environ.get("KERNOPT_REQUIRE_DOCKER") == "1":  # CI: these must run, not skip
            raise
        pytest.skip(f"no Docker engine: {e}")
    return get_sandbox("docker", target)  # a missing image is a failure, not a skip


EvFactory = Callable[..., CFamilyEvaluator]


@pytest.fixture(scope="session")
def make_ev(workroot: Path, planted: Secrets) -> Iterator[EvFactory]:
    """Evaluators by (task, sandbox), cached for the session so each builds its baseline once."""
    cache: dict[str, CFamilyEvaluator] = {}

    def make(task: Path, sandbox: str) -> CFamilyEvaluator:
        key = f"{task}-{sandbox}"
        if key not in cache:
            t: Task = load_task(task)
            cache[key] = CFamilyEvaluator(t, sandbox_for(sandbox, t.target), EvalConfig(**CONFIG), workroot / f"ev{len(cache)}")  # type: ignore[arg-type]
        return cache[key]

    yield make
    for ev in cache.values():
        ev.close()


def show(r: EvalResult) -> str:
    return (f"{r.status}: {r.reason[:2000]}\nrace check {r.verification.race_check}: {r.verification.race_detail[:2000]}\n"
            f"log: {r.log[-1500:]}")


def _passwd_lines() -> list[str]:
    try:
        return [ln for ln in Path("/etc/passwd").read_text().splitlines()[:3] if len(ln) >= 8]
    except OSError:
        return []


def assert_no_host_data(r: EvalResult, planted: Secrets) -> None:
    """Nothing from the host or from the measured program's environment in the reason, the log or the race
    check's detail: not the planted sentinels (whole or their first 8 characters), not a line of
    /etc/passwd, not the sandbox's marker variable or the sanitizer's options as the environment holds
    them, and not the text a forged report carries (rr12 marks it `LEAK[`)."""
    outputs = {"reason": r.reason, "log": r.log, "race_detail": r.verification.race_detail}
    for where, text in outputs.items():
        for secret in (planted.env, planted.file):
            assert secret not in text and secret[:8] not in text, f"sentinel in {where}: {show(r)}"
        for line in _passwd_lines():
            assert line not in text, f"/etc/passwd in {where}: {show(r)}"
        for needle in ("KERNOPT_SANDBOX=", "TSAN_OPTIONS=history", "LEAK[", "kernopt-redteam-race leftover"):
            assert needle not in text, f"{needle!r} in {where}: {show(r)}"


def evaluate(ev: CFamilyEvaluator, source: str, planted: Secrets) -> EvalResult:
    r = ev.evaluate(Candidate(files={ev.task.kernel: source}))  # raising is a failure of its own
    assert_no_host_data(r, planted)
    return r


def _params(names: list[str], sandboxes: tuple[str, ...] = BOTH) -> list[object]:
    return [pytest.param(k, sb, id=f"{k.removesuffix('.c')}-{sb}") for k in names for sb in sandboxes]


# ---------------------------------------------------------------- racy kernels: never ok
RACY = [
    "rr00_plain_race.c",  # control: found by the sanitizer
    "rr01_tsan_heap_range.c", "rr02_tsan_own_malloc.c", "rr03_tsan_symbol_walk.c", "rr04_tsan_environ.c",
    "rr05_unfiltered_probe.c", "rr06_tsan_timing.c",  # 1: they detect the sanitizer
    "rr07_close_stderr.c", "rr08_report_fd.c", "rr09_dup2_devnull.c",  # 2: they silence it
    "rr10_ignore_annotations.c", "rr11_fake_happens_before.c",  # 2: they blind it
    "rr13_libm_modf_race.c", "rr14_libm_modf_uninstrumented.c",  # 4: stores it cannot see
]


@pytest.mark.parametrize("name,sandbox", _params(RACY))
def test_racy_kernel_never_ok(make_ev: EvFactory, planted: Secrets, name: str, sandbox: str) -> None:
    r = evaluate(make_ev(REDUCTION, sandbox), kernel(name), planted)
    assert r.status != "ok", f"a racy kernel was accepted: {show(r)}"
    assert not r.faster and r.speedup is None, show(r)


def test_control_race_is_found_by_the_sanitizer(make_ev: EvFactory, planted: Secrets) -> None:
    """The race the other kernels hide is one the check finds when nothing hides it."""
    r = evaluate(make_ev(REDUCTION, "local"), kernel("rr00_plain_race.c"), planted)
    assert r.status == "rejected" and r.verification.race_check == "race", show(r)


# ---------------------------------------------------------------- 3: forged report, host content, leftovers
@pytest.fixture
def no_leftovers() -> Iterator[None]:
    for p in LEFTOVERS:
        p.unlink(missing_ok=True)
    yield
    for p in LEFTOVERS:
        p.unlink(missing_ok=True)


@pytest.mark.parametrize("sandbox", BOTH)
@pytest.mark.usefixtures("no_leftovers")
def test_forged_report_copies_nothing_and_leaves_nothing(make_ev: EvFactory, planted: Secrets, sandbox: str) -> None:
    """rr12: a race-free kernel that prints a forged race report full of host content in the race-check
    run. The verdict may be a rejection (a forged report, or a race with nothing copied) or ok; never any of
    that content, and no file outside the work directory afterwards."""
    r = evaluate(make_ev(REDUCTION, sandbox), kernel("rr12_forged_report_host_data.c"), planted)
    assert not r.faster, show(r)
    left = [str(p) for p in LEFTOVERS if p.exists()]
    assert not left, f"files the kernel wrote outlived the run: {left}; {show(r)}"


# ---------------------------------------------------------------- 5: an MPI rank and its launcher
@pytest.mark.parametrize("sandbox", BOTH)
def test_mpi_rank_cannot_touch_mpirun(make_ev: EvFactory, planted: Secrets, sandbox: str) -> None:
    """rr15 answers 4242 (it wrote into mpirun's memory), 4141 (read it), 4040 (was permitted to); refused,
    it answers right."""
    r = evaluate(make_ev(SMALL_DOT, sandbox), kernel("rr15_mpi_write_mpirun.c"), planted)
    for code in ("got 4242", "got 4141", "got 4040"):
        assert code not in r.reason, f"a rank reached mpirun ({code}): {show(r)}"
    assert not r.faster, show(r)


# ---------------------------------------------------------------- 6: crash kernopt from the work directory
def _force_remove(top: Path) -> None:
    """Remove what a failed clean-up left (mode-000 directories, chains deeper than Python recurses)."""
    if top.exists():
        subprocess.run(["chmod", "-R", "u+rwx", str(top)], capture_output=True, check=False)
        subprocess.run(["rm", "-rf", str(top)], capture_output=True, check=False)


def _remaining(top: Path) -> list[str]:
    out = subprocess.run(["find", str(top), "-mindepth", "1", "-maxdepth", "3"], capture_output=True, text=True, check=False)
    return out.stdout.split()[:5] if top.exists() else []


CRASH = ["rr16_deep_directories.c", "rr17_mode000_directories.c", "rr18_200k_files.c"]


@pytest.mark.parametrize("name,sandbox", _params(CRASH))
def test_work_directory_mess_gets_a_verdict_and_is_cleaned(workroot: Path, planted: Secrets, name: str, sandbox: str) -> None:
    """A fresh evaluator per case: evaluate() returns a verdict (any status) and, after close(), nothing
    is left under its workroot."""
    t = load_task(REDUCTION)
    root = workroot / f"crash-{name.removesuffix('.c')}-{sandbox}"
    ev = CFamilyEvaluator(t, sandbox_for(sandbox, t.target), EvalConfig(**CONFIG), root)  # type: ignore[arg-type]
    try:
        try:
            r = ev.evaluate(Candidate(files={t.kernel: kernel(name)}))
        finally:
            ev.close()
        assert isinstance(r, EvalResult)
        assert_no_host_data(r, planted)
        assert not r.faster, show(r)
        left = _remaining(root)
        assert not left, f"left under the workroot after close(): {left}; {show(r)}"
    finally:
        _force_remove(root)


# ---------------------------------------------------------------- bookkeeping
def test_every_kernel_has_a_test() -> None:
    named = set(RACY) | set(CRASH) | {"rr12_forged_report_host_data.c", "rr15_mpi_write_mpirun.c"}
    assert sorted(p.name for p in KERNELS.glob("*.c")) == sorted(named)


def test_headers_say_attack_result_and_defence() -> None:
    for p in KERNELS.glob("*.c"):
        head = p.read_text().split("*/", 1)[0]
        assert head.startswith("/* Red team, issue 26"), p.name
        if not p.name.startswith("rr00"):
            assert "Against main (e2530a1)" in head and re.search(r"Expected defen[cs]e", head), p.name
