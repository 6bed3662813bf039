"""The local executor's worker: `python -m kernopt.bench.worker`, one process per work item.

Protocol: the WorkItem as JSON on stdin; on stdout one JSON object per line, {"event": ProgressEvent}
while the item runs and {"result": WorkResult} once at the end. Anything else the run prints goes to
stderr (fd 1 is pointed there, so a chatty library cannot corrupt the protocol).

The worker dies with the bench: the kernel sends it SIGTERM when its parent dies (PR_SET_PDEATHSIG),
and the local executor sends SIGTERM when the item's time is up. SIGTERM unwinds the run (the sandbox's
`finally` blocks kill the candidate processes they started, containers are removed) and the worker
exits 143 without a result; the run directory stays resumable.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from types import FrameType
from typing import IO, TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from kernopt.bench.work import ProgressEvent, WorkItem, WorkResult

PR_SET_PDEATHSIG = 1
PARENT_ENV = "KERNOPT_BENCH_PARENT"  # the pid the worker expects as its parent (set by the executor)
KILL_GRACE_S = 10.0  # after SIGTERM, how long a worker may take to clean up before SIGKILL


# ---------------------------------------------------------------- the executor's side (local and Ray alike)
def spawn(item: WorkItem, stderr: IO[bytes], env: dict[str, str] | None = None, cwd: str | None = None) -> subprocess.Popen[str]:
    """Start a worker on `item`: in a session of its own (a timeout signals its whole group), told who
    its parent is (it dies with it), the item written to its stdin."""
    proc = subprocess.Popen([sys.executable, "-m", "kernopt.bench.worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=stderr, text=True, env={**os.environ, **(env or {}), PARENT_ENV: str(os.getpid())},
                            cwd=cwd, start_new_session=True)
    assert proc.stdin is not None
    with contextlib.suppress(BrokenPipeError):  # it died at once: its reader sees EOF, the item is crashed
        proc.stdin.write(item.model_dump_json())
        proc.stdin.close()
    return proc


def read_protocol(proc: subprocess.Popen[str], on_event: Callable[[ProgressEvent], None], on_result: Callable[[WorkResult], None]) -> None:
    """The worker's stdout, line by line, until it closes."""
    from pydantic import ValidationError

    from kernopt.bench.work import ProgressEvent, WorkResult

    assert proc.stdout is not None
    for line in proc.stdout:
        try:
            msg: Any = json.loads(line)
            if "event" in msg:
                on_event(ProgressEvent.model_validate(msg["event"]))
            elif "result" in msg:
                on_result(WorkResult.model_validate(msg["result"]))
        except (ValueError, ValidationError, TypeError):
            continue  # not a protocol line (cannot happen: fd 1 is the protocol's alone)


def signal_group(proc: subprocess.Popen[str], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)  # the worker leads its own session and group


def timed_out(item: WorkItem, elapsed: float, host: str, where: str = "") -> WorkResult:
    from kernopt.bench.work import WorkResult

    return WorkResult(key=item.key, status="timeout", run_dir=item.run_dir, elapsed_s=elapsed, host=host,
                      error=f"killed after {item.timeout_s:g}s (the task timeout){where}; its run directory resumes next time")


def died(item: WorkItem, returncode: int | None, stderr: IO[bytes], elapsed: float, host: str, where: str = "",
         mend: Callable[[str], str] = str) -> WorkResult:
    """A worker that ended without a result: how it ended, and its last line on stderr."""
    from kernopt.bench.work import WorkResult, one_line

    stderr.seek(0)
    lines = [ln.strip() for ln in stderr.read()[-4000:].decode(errors="replace").splitlines() if ln.strip()]
    how = f"exit status {returncode}"
    if returncode is not None and returncode < 0:
        try:
            how = f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            how = f"killed by signal {-returncode}"
    last = f": {one_line(mend(lines[-1]), 200)}" if lines else ""
    return WorkResult(key=item.key, status="crashed", run_dir=item.run_dir, elapsed_s=elapsed, host=host,
                      error=f"the worker{where} died ({how}){last}")


# ---------------------------------------------------------------- the worker's side


class Terminated(BaseException):
    """SIGTERM: the bench died or the item's time is up. Not an Exception, so nothing turns it into a result."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: a second one must not cut the cleanup short
    raise Terminated()


def die_with_parent() -> None:
    """Ask for SIGTERM when the parent dies; exit now if it already has (it died before we asked)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the executor's timeouts still apply
        return
    expected = os.environ.get(PARENT_ENV)
    if expected and os.getppid() != int(expected):
        os._exit(143)


def main() -> int:
    signal.signal(signal.SIGTERM, _on_sigterm)
    die_with_parent()
    # The protocol gets a private copy of stdout; fd 1 itself goes to stderr from here on.
    proto: TextIO = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    from kernopt.bench.work import WorkItem, encode, run_work_item

    item = WorkItem.model_validate_json(sys.stdin.read())

    def send(event: ProgressEvent) -> None:
        proto.write(encode(event, "event") + "\n")

    try:
        result = run_work_item(item, send)
    except Terminated:
        return 143
    proto.write(encode(result, "result") + "\n")
    proto.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
