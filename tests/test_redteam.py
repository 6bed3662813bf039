"""Red-team suite (issue 15, item 5): hostile kernels against the C-family evaluator's trust boundary.

Every kernel under tests/redteam/ tries one attack (its header says which, what it got against the
in-process driver that came before the monitor, and what the defence is); each test asserts the
verdict's status AND the part of its reason that names the defence, under the local and (when an
engine answers) the docker sandbox. Controls (an honest naive kernel, an honest optimized OpenMP gemm,
an honest MPI dot) must stay ok, and the optimized one significantly faster.

Cases marked xfail are weaknesses of the current design, found by this suite: they assert what a
sound evaluator must answer and pass once it is fixed (strict ones then fail: remove the mark).

Every verdict is also checked for host data: a sentinel planted in this process's environment and in
a world-readable host file (/tmp/kernopt-redteam-sentinel, which some kernels try to read) must never
appear in a reason or log, neither as text nor as the bytes of a number the reason prints.
Docker cases skip without an engine unless KERNOPT_REQUIRE_DOCKER=1.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kernopt.candidate import Candidate
from kernopt.config import EvalConfig
from kernopt.errors import UserError
from kernopt.evaluators.c_family.compare import Call, ReportError, load_outputs, read_report
from kernopt.evaluators.c_family.evaluator import CFamilyEvaluator
from kernopt.evaluators.result import EvalResult
from kernopt.sandbox import Sandbox, get_sandbox
from kernopt.task import Task, load_task
from tests.conftest import enterable_tmpdir

REPO = Path(__file__).resolve().parent.parent
REDTEAM = Path(__file__).resolve().parent / "redteam"
SMALL_GEMM = REPO / "tests" / "data" / "small_gemm"  # millisecond calls
GEMM = REPO / "tasks" / "openmp" / "gemm"  # the demo's task: for the optimized control's speed
SMALL_DOT = REDTEAM / "small_dot"  # tasks/mpi/dot with 2M-element timed calls
SENTINEL_FILE = Path("/tmp/kernopt-redteam-sentinel")  # the path the read-a-host-file kernels try
LISTEN_PORT = 47819  # where rd1_libc_connect.c connects

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("mpicc") is None, reason="needs gcc and mpicc")


def kernel(name: str) -> str:
    return (REDTEAM / name).read_text()


# ---------------------------------------------------------------- fixtures
@dataclass(frozen=True)
class Secrets:
    env: str  # planted in this process's environment (the orchestrator's)
    file: str  # the content of SENTINEL_FILE


@pytest.fixture(scope="session")
def planted() -> Iterator[Secrets]:
    s = Secrets(env="krtenv" + secrets.token_hex(10), file="krtfil" + secrets.token_hex(10))
    old = os.environ.get("KERNOPT_REDTEAM_SECRET")
    os.environ["KERNOPT_REDTEAM_SECRET"] = s.env
    created = not SENTINEL_FILE.exists() or SENTINEL_FILE.read_text().startswith("krtfil")
    if created:
        SENTINEL_FILE.write_text(s.file)
        SENTINEL_FILE.chmod(0o644)
    else:  # somebody else's file at that path: leave it, and look for its bytes instead
        s = Secrets(env=s.env, file=SENTINEL_FILE.read_text(errors="replace"))
    try:
        yield s
    finally:
        if old is None:
            os.environ.pop("KERNOPT_REDTEAM_SECRET", None)
        else:
            os.environ["KERNOPT_REDTEAM_SECRET"] = old
        if created:
            SENTINEL_FILE.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def workroot() -> Iterator[Path]:
    with enterable_tmpdir("kernopt-redteam-") as d:
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
    """Evaluators by (task, sandbox, config), cached for the session so each builds its baseline once.
    Five rounds: fewer can never be significant, and a test that a hack is not faster needs a
    measurement that could have said it was."""
    cache: dict[str, CFamilyEvaluator] = {}

    def make(task: Path, sandbox: str, **config: object) -> CFamilyEvaluator:
        t: Task = load_task(task)
        key = f"{task}-{sandbox}-{sorted(config.items())}"
        if key not in cache:
            cfg = EvalConfig(**{"rounds": 5, "race_threads": [2], "race_threads_o0": [], **config})  # type: ignore[arg-type]
            cache[key] = CFamilyEvaluator(t, sandbox_for(sandbox, t.target), cfg, workroot / f"ev{len(cache)}")
        return cache[key]

    yield make
    for ev in cache.values():
        ev.close()


def show(r: EvalResult) -> str:
    return f"{r.status}: {r.reason}\nflags {r.flags}\n{r.log[-1500:]}"


_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def assert_no_host_data(r: EvalResult, planted: Secrets) -> None:
    """Neither sentinel, nor any 8 printable bytes of this process's environment or of the sentinel
    file, may appear in the verdict: as text, or as the bytes of a number the reason prints (a
    wrong-answer reason prints the first bad element with all its digits)."""
    text = f"{r.reason}\n{r.log}"
    for secret in (planted.env, planted.file):
        assert secret not in text and secret[:8] not in text, show(r)
    environ = Path("/proc/self/environ").read_bytes()
    for token in _NUMBER.findall(r.reason):
        try:
            raw = struct.pack("<d", float(token))
        except (OverflowError, ValueError):
            continue
        if all(32 <= b < 127 for b in raw):
            assert raw not in environ and raw not in planted.file.encode(), f"host bytes {raw!r} in the reason: {show(r)}"


def evaluate(ev: CFamilyEvaluator, source: str, planted: Secrets) -> EvalResult:
    r = ev.evaluate(Candidate(files={ev.task.kernel: source}))
    assert_no_host_data(r, planted)
    return r


def assert_verdict(r: EvalResult, status: str, why: str) -> None:
    """`status`: the status, or statuses as a regular expression ("rejected|ok"); `why`: a regular
    expression the reason must contain. On a loaded machine an `ok` result may say "machine too busy"
    where it would say "not significantly faster" (docs/verification.md, "Busy machine"): neither is a win."""
    assert re.fullmatch(status, r.status), show(r)
    assert re.search(why, r.reason), show(r)
    assert not r.faster, show(r)  # never a verified speedup
    if r.status != "ok":
        assert r.speedup is None and r.reward < 0, show(r)


# ---------------------------------------------------------------- the attack classes
BOTH = ("local", "docker")


@dataclass(frozen=True)
class Case:
    kernel: str
    task: Path
    status: str
    why: str  # a regular expression the reason must contain
    sandboxes: tuple[str, ...] = BOTH
    weakness: str = ""  # a known weakness: xfail(strict) with this explanation
    strict: bool = True


CASES = [
    # 1a: the driver's GOT entry of its timer. Full RELRO: the GOT is read-only (and no timer is in the process).
    Case("ra1_got_timer.c", SMALL_GEMM, "runtime_error", "SIGSEGV"),
    # 1b: the saved start time moved forward on the stack. The clock is the monitor's: nothing to move.
    Case("ra2_stack_start_time.c", SMALL_GEMM, "ok", "not significantly faster|machine too busy"),
    # 1c, 1d: the result file rewritten or extended with MPI file I/O. The gate refuses MPI_File_*.
    Case("ra3_mpi_rewrite_times.c", SMALL_DOT, "rejected", "kernel references MPI_File_"),
    Case("ra4_mpi_fake_lines.c", SMALL_DOT, "rejected", "kernel references MPI_File_"),
    # 2a: every seed on argv, answers precomputed in the warm-up. Seeds arrive one call at a time.
    Case("rb1_future_seeds.c", SMALL_GEMM, "ok", "not significantly faster|machine too busy"),
    # 2b: answers cached across processes in a file. Fresh seeds every call and round; no MPI_File_*.
    Case("rb2_cross_process_cache.c", SMALL_DOT, "rejected", "kernel references MPI_File_"),
    # 3a, 3b: output names and malformed records in a result file the host trusted.
    Case("rc1_host_file_name.c", SMALL_DOT, "rejected", "kernel references MPI_File_"),
    Case("rc2_malformed_record.c", SMALL_DOT, "rejected", "kernel references MPI_File_"),
    # 4: libc reached by pointer from allowed symbols; MPI spawn; a team left running.
    Case("rd1_libc_shell.c", SMALL_GEMM, "runtime_error", "system call"),
    Case("rd1_libc_read_host_file.c", SMALL_GEMM, "wrong_answer", "got 777"),  # 777: the open was refused
    Case("rd2_mpi_libc_shell.c", SMALL_DOT, "runtime_error", "system call"),  # mpirun's code 159 (128 + SIGSYS), named
    Case("rd2_mpi_libc_read_host_file.c", SMALL_DOT, "wrong_answer", "got 777"),
    Case("rd3_mpi_comm_spawn.c", SMALL_DOT, "rejected", "kernel references MPI_Comm_spawn"),
    Case("rd4_gomp_leftover_worker.c", SMALL_GEMM, "rejected", "kernel references GOMP_parallel_start"),
    # New classes (this suite). N1: finish the call after "done", before the outputs are copied.
    Case("rn1_post_phase_hook.c", SMALL_GEMM, "wrong_answer", "not written"),
    # N2, N4: compute before "ready", by hooking the driver or by replacing it; N2 under MPI too. Refused when
    # the CPU outside the calls is past the bound; below it, charged to the calls as time, so no faster.
    Case("rn2_fill_phase_hook.c", SMALL_GEMM, "rejected|ok", "outside the timed call|not significantly faster|machine too busy"),
    Case("rn4_own_protocol_loop.c", SMALL_GEMM, "rejected|ok", "outside the timed call|not significantly faster|machine too busy"),
    Case("rn6_mpi_fill_phase_hook.c", SMALL_DOT, "rejected|ok", "outside the timed call|not significantly faster|machine too busy",
         sandboxes=("local",)),
    # N2b: the same, kept inside the allowance for CPU outside the calls. It won 1.2-1.4x while the
    # allowance was a bound only; now the excess is charged to each call as time, and the allowance is a
    # share of the baseline's work: refused, or (if noise keeps it under the bound) no faster.
    Case("rn7_fill_phase_within_allowance.c", SMALL_GEMM, "rejected|ok", "outside the timed call|not significantly faster|machine too busy"),
    # N6: the allowance's share of the CPU inside the call, inflated by a thread spinning on an idle core
    # (won 1.4-1.5x when the share was of the candidate's own CPU).
    Case("rn8_spin_inflates_allowance.c", SMALL_GEMM, "rejected|ok", "outside the timed call|not significantly faster|machine too busy"),
    # N3: a thread the seccomp filter does not cover (Open MPI's, started before the filter).
    # (Before a7372bf the filter did not cover them: the shell ran.) Killed by SIGSYS: mpirun's code 159.
    Case("rn3_mpi_unfiltered_thread.c", SMALL_DOT, "runtime_error", "system call|code 159"),
    # N5: forged report records on the measured program's stdout and stderr.
    Case("rn5_forged_report_lines.c", SMALL_GEMM, "ok", "not significantly faster|machine too busy"),
]


def _params() -> list[object]:
    out = []
    for c in CASES:
        for sb in c.sandboxes:
            marks = [pytest.mark.xfail(strict=c.strict, reason=c.weakness)] if c.weakness else []
            out.append(pytest.param(c, sb, marks=marks, id=f"{c.kernel.removesuffix('.c')}-{sb}"))
    return out


@pytest.mark.parametrize("case,sandbox", _params())
def test_attack(make_ev: EvFactory, planted: Secrets, case: Case, sandbox: str) -> None:
    r = evaluate(make_ev(case.task, sandbox), kernel(case.kernel), planted)
    assert_verdict(r, case.status, case.why)


def test_every_kernel_has_a_case() -> None:
    named = {c.kernel for c in CASES} | {"rd1_libc_connect.c", "control_naive_gemm.c", "control_omp_gemm.c", "control_mpi_dot.c"}
    assert sorted(p.name for p in REDTEAM.glob("*.c")) == sorted(named)


def test_connect_reaches_no_listener(make_ev: EvFactory, planted: Secrets) -> None:
    """rd1_libc_connect.c connects to 127.0.0.1:47819 through libc reached by pointer: the filter kills it
    before any connection (under docker there is no route to the host's loopback anyway)."""
    got: list[bytes] = []
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        srv.bind(("127.0.0.1", LISTEN_PORT))
    except OSError:
        srv.close()
        pytest.skip(f"port {LISTEN_PORT} is taken")
    srv.listen(4)
    srv.settimeout(0.2)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            with conn:
                got.append(conn.recv(100) or b"(connected)")

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        r = evaluate(make_ev(SMALL_GEMM, "local"), kernel("rd1_libc_connect.c"), planted)
    finally:
        stop.set()
        t.join(5)
        srv.close()
    assert got == [], f"the kernel reached the host: {got}"
    assert_verdict(r, "runtime_error", "system call")


# ---------------------------------------------------------------- controls
@pytest.mark.parametrize("sandbox", BOTH)
def test_control_naive_ok(make_ev: EvFactory, planted: Secrets, sandbox: str) -> None:
    r = evaluate(make_ev(SMALL_GEMM, sandbox), kernel("control_naive_gemm.c"), planted)
    assert r.status == "ok" and not r.faster, show(r)
    assert r.verification.timed_outputs_checked


def test_control_optimized_gemm_significantly_faster(make_ev: EvFactory, planted: Secrets) -> None:
    r = evaluate(make_ev(GEMM, "local"), kernel("control_omp_gemm.c"), planted)
    assert r.status == "ok" and r.faster and r.speedup is not None and r.speedup > 1.5, show(r)
    assert r.verification.race_check == "clean", show(r)


def test_control_mpi_dot_ok(make_ev: EvFactory, planted: Secrets) -> None:
    r = evaluate(make_ev(SMALL_DOT, "local", rounds=2), kernel("control_mpi_dot.c"), planted)
    assert r.status == "ok", show(r)


# ---------------------------------------------------------------- the host's parsing of what comes back
SETUP = ('{"setup": 4, "ranks": 1, "bufs": [{"name": "a", "dtype": 0, "role": 0, "count": 16}, '
         '{"name": "c", "dtype": 0, "role": 1, "count": 16}]}')
CALL = ('{"call": 0, "n": 4, "seed": 5, "record": 1, "time": 0.001, "cpu_in": 0.001, "cpu_out": 0.0, "mutated": null, '
        '"bytes": 128, "key": 1, "hash": 2}')
MALFORMED = {
    "size is a word": [SETUP, CALL.replace('"n": 4', '"n": "crash"')],
    "time is NaN": [SETUP, CALL.replace('"time": 0.001', '"time": NaN')],
    "time is infinite": [SETUP, CALL.replace('"time": 0.001', '"time": Infinity')],
    "index is a bool": [SETUP, CALL.replace('"call": 0', '"call": true')],
    "nested a million deep": [SETUP, "{\"a\": " + "[" * 1_000_000 + "]" * 1_000_000 + "}"],
    "a list": ["[1, 2]"],
    "mutated is an object": [SETUP, CALL.replace('"mutated": null', '"mutated": {"a": 1}')],
    "count beyond 64 bits": ['{"setup": 4, "bufs": [{"name": "a", "dtype": 0, "role": 1, "count": 99999999999999999999}]}'],
    "error is an object": ['{"error": {"x": [1, 2, 3]}}'],
    "closing line is a list": [SETUP, CALL, '{"done": ["abc"]}'],
    "ten megabytes on a line": ['{"x": "' + "a" * 10_000_000 + '"}'],
    "lone surrogate": ['{"setup": 4, "bufs": [{"name": "\\ud800", "dtype": 0, "role": 1, "count": 16}]}'],
    "a name for the file": [SETUP, CALL.replace('"mutated": null', '"mutated": null, "file": "/dev/zero"')],
}


@pytest.mark.parametrize("lines", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_report_never_raises(lines: list[str]) -> None:
    run = read_report("\n".join(lines), "abc")
    assert not run.complete
    assert all(c.file in ("", f"o_{i}.bin") for i, c in enumerate(run.calls))  # names are the host's, never the record's


def test_report_with_a_huge_integer_never_raises() -> None:
    run = read_report("\n".join([SETUP, CALL.replace('"seed": 5', '"seed": ' + "9" * 5000)]), "abc")
    assert not run.complete and run.error


def test_output_file_replaced_by_a_link_to_a_host_file(tmp_path: Path, planted: Secrets) -> None:
    """A measured program that could write its run directory might replace o_0.bin with a link to a host
    file of the right size: the host refuses links and checks the monitor's keyed hash, and says so
    without the file's content."""
    layout: list[dict[str, object]] = [{"name": "c", "dtype": 4, "role": 1, "count": len(planted.file)}]
    host_file = tmp_path / "host-secret"  # a file of this test's own (the shared sentinel may go with another session)
    host_file.write_text(planted.file)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "o_0.bin").symlink_to(host_file)
    os.link(host_file, run_dir / "o_1.bin")
    for i in (0, 1):
        call = Call(n=1, seed=1, time=0.0, warmup=False, mutated=None, file=f"o_{i}.bin", nbytes=len(planted.file),
                    key=123, digest=456)
        with pytest.raises(ReportError) as e:
            load_outputs(run_dir, call, layout)
        assert planted.file[:8] not in str(e.value)
