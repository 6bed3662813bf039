"""Who may time when: a host-wide lock so evaluations running side by side never disturb each other's timings.

Every evaluator phase holds the lock: building, verifying and race-checking hold it *shared*, timing
(and the winner's re-measurement) holds it *exclusive*. So parallel bench jobs (or two `kernopt optimize`
runs, or Ray workers on one node) compile and verify side by side, but while one of them times, no other
kernopt work runs on the machine, and the timed program gets every core its task asks for.

Writer preference: a timer waiting for the lock blocks new shared holders (they queue behind it on a
second lock file, the turnstile), so a stream of overlapping builds cannot starve timing.

The lock is `flock` on a file: it holds across processes and users, and the kernel drops it when its
holder dies (a SIGKILLed bench leaves nothing stale). `KERNOPT_HOST_LOCK` names the file (default
/tmp/kernopt-host.lock); `off` disables it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Iterator
from typing import Literal

Mode = Literal["shared", "exclusive"]
DEFAULT_PATH = "/tmp/kernopt-host.lock"


def lock_path() -> str | None:
    path = os.environ.get("KERNOPT_HOST_LOCK", DEFAULT_PATH)
    return None if path.strip().lower() in ("", "off", "0", "none") else path


def _open(path: str) -> int | None:
    """An fd to flock: created world-readable and -writable so every user's runs share one lock."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o666)
    except OSError:
        return None  # an unusable lock file (another user's, read-only /tmp): run unlocked rather than fail
    with contextlib.suppress(OSError):
        os.fchmod(fd, 0o666)
    return fd


class _Held(threading.local):
    mode: Mode | None = None


_held = _Held()


@contextlib.contextmanager
def hold(mode: Mode, waited: dict[str, float] | None = None) -> Iterator[None]:
    """Hold the host lock in `mode` for the block. Nested use in one thread is a no-op when the lock is
    already held at least as strongly; asking for exclusive inside shared is a bug (flock cannot upgrade
    atomically), so phases are held one after the other. `waited["wait"]` accumulates the seconds spent
    waiting, so a phase's time can leave them out."""
    path = lock_path()
    if path is None or _held.mode == "exclusive" or _held.mode == mode:
        yield
        return
    if _held.mode == "shared":
        raise RuntimeError("placement.hold: exclusive requested inside a shared hold")
    main, gate = _open(path), _open(path + ".turnstile")
    try:
        if main is None or gate is None:  # an unusable lock file: run unlocked rather than fail
            yield
            return
        t0 = time.monotonic()
        fcntl.flock(gate, fcntl.LOCK_EX)
        fcntl.flock(main, fcntl.LOCK_EX if mode == "exclusive" else fcntl.LOCK_SH)
        fcntl.flock(gate, fcntl.LOCK_UN)
        if waited is not None:
            waited["wait"] = waited.get("wait", 0.0) + time.monotonic() - t0
        _held.mode = mode
        try:
            yield
        finally:
            _held.mode = None
    finally:
        for fd in (main, gate):
            if fd is not None:
                os.close(fd)  # closing the fd releases its flock
