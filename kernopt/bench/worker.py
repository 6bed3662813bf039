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

import ctypes
import os
import signal
import sys
from types import FrameType
from typing import TextIO

PR_SET_PDEATHSIG = 1
PARENT_ENV = "KERNOPT_BENCH_PARENT"  # the pid the worker expects as its parent (set by the local executor)


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

    from kernopt.bench.work import ProgressEvent, WorkItem, encode, run_work_item

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
