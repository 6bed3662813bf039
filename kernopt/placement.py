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

Who holds it, for display only: a holder (and a timer queued at the turnstile) writes a one-line record
(pid, mode, what it is doing, since when) into `<lock>.holders/`, and removes it on release; a waiter
reads them to say whom it waits for (`on_wait`). The records are advisory: nothing about who may run
depends on them, a SIGKILLed holder leaves one behind (readers skip records of dead pids).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Holder:
    """One record of `<lock>.holders/`: who holds (or, `mode` "waiting", queues to time) and since when."""

    pid: int
    mode: str
    what: str
    since: float  # time.time() when it got the lock (or started queueing)

    def describe(self, now: float | None = None) -> str:
        """'pid 4242 (timing gemm c0007) for 12 s'."""
        held = max(0.0, (time.time() if now is None else now) - self.since)
        return f"pid {self.pid} ({self.what}) for {held:.0f} s"


def _holders_dir(path: str) -> str:
    return path + ".holders"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process (EPERM): it exists
    return True


def holders(path: str | None = None) -> list[Holder]:
    """The recorded holders of the lock at `path` (default: lock_path()) whose process is alive, the
    longest-held first. Advisory: display only, never for deciding anything."""
    path = path or lock_path()
    if path is None:
        return []
    d = _holders_dir(path)
    try:
        names = os.listdir(d)
    except OSError:
        return []
    out: list[Holder] = []
    for name in names[:256]:
        try:
            # Anyone may write here: no symlink followed, nothing but a regular file read (a FIFO must not block).
            fd = os.open(os.path.join(d, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    continue
                rec = json.loads(os.read(fd, 4096))
            finally:
                os.close(fd)
            what = "".join(ch for ch in str(rec["what"]) if ch.isprintable())[:120]  # no terminal control codes
            h = Holder(int(rec["pid"]), "".join(ch for ch in str(rec["mode"]) if ch.isalpha())[:10], what, float(rec["since"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if _alive(h.pid):
            out.append(h)
    return sorted(out, key=lambda h: h.since)


def describe_wait(path: str, mode: Mode, waited_s: float) -> str:
    """The phase text of a waiter: whom it waits for and how long it has waited."""
    me = os.getpid()
    others = [h for h in holders(path) if h.pid != me]
    held = [h for h in others if h.mode != "waiting"]
    queued = [h for h in others if h.mode == "waiting"]
    want = "the timing lock" if mode == "exclusive" else "the timing lock (to build and check)"
    if held:
        who = held[0].describe() if held[0].mode == "exclusive" or len(held) == 1 else \
            f"{held[0].describe()} and {len(held) - 1} other{'s' * (len(held) > 2)}"
        text = f"waiting for {want} held by {who}"
    elif queued:
        text = f"waiting for {want}: queued behind {queued[0].describe()}"
    else:
        text = f"waiting for {want}"
    return f"{text}; waited {waited_s:.0f} s"


def _record(path: str, mode: str, what: str) -> str | None:
    """Write this thread's holder record; returns its file (None when it cannot be written: display only)."""
    d = _holders_dir(path)
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(d, 0o1777)
            os.chmod(d, 0o1777)  # every user's runs record here (sticky: each removes only its own)
        if not stat.S_ISDIR(os.lstat(d).st_mode):  # a link someone put in its place: write nothing through it
            return None
        f = os.path.join(d, f"{os.getpid()}-{threading.get_ident()}")
        tmp = f + ".tmp"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        # a new file of our own (never through a link someone else left under our name), then renamed into place
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        try:
            os.write(fd, json.dumps({"pid": os.getpid(), "mode": mode, "what": what, "since": time.time()}).encode())
            os.fchmod(fd, 0o644)
        finally:
            os.close(fd)
        os.replace(tmp, f)
        return f
    except OSError:
        return None


def _unrecord(f: str | None) -> None:
    if f is not None:
        with contextlib.suppress(OSError):
            os.unlink(f)


class _Held(threading.local):
    mode: Mode | None = None


_held = _Held()


def _flock_reporting(fd: int, op: int, report: Callable[[float], None] | None) -> None:
    """flock(fd, op), blocking as always; when it does not succeed at once and `report` is given, report(
    seconds waited) is called now and about every second from a helper thread until it returns."""
    if report is None:
        fcntl.flock(fd, op)
        return
    try:
        fcntl.flock(fd, op | fcntl.LOCK_NB)  # free: taken at once, nothing to report
        return
    except BlockingIOError:
        pass
    t0 = time.monotonic()
    done = threading.Event()

    def tick() -> None:
        while not done.is_set():
            with contextlib.suppress(Exception):  # a display failure must never affect the lock
                report(time.monotonic() - t0)
            done.wait(1.0)

    ticker = threading.Thread(target=tick, name="kernopt-lock-wait", daemon=True)
    ticker.start()
    try:
        fcntl.flock(fd, op)
    finally:
        done.set()
        ticker.join(5)


@contextlib.contextmanager
def hold(mode: Mode, waited: dict[str, float] | None = None, what: str = "",
         on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold the host lock in `mode` for the block. Nested use in one thread is a no-op when the lock is
    already held at least as strongly; asking for exclusive inside shared is a bug (flock cannot upgrade
    atomically), so phases are held one after the other. `waited["wait"]` accumulates the seconds spent
    waiting, so a phase's time can leave them out. `what` says what the lock is held for (recorded for
    waiters to show); `on_wait(text)` is called about every second while this call waits for the lock,
    with whom it waits for (describe_wait), from a helper thread."""
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
        report = None if on_wait is None else (lambda _s: on_wait(describe_wait(path, mode, time.monotonic() - t0)))
        what = what or f"{mode} hold"
        record: str | None = None
        try:
            _flock_reporting(gate, fcntl.LOCK_EX, report)
            if mode == "exclusive":  # queued first at the turnstile: new shared holders wait for this timer
                record = _record(path, "waiting", what)
            _flock_reporting(main, fcntl.LOCK_EX if mode == "exclusive" else fcntl.LOCK_SH, report)
            fcntl.flock(gate, fcntl.LOCK_UN)
            _unrecord(record)
            record = _record(path, mode, what)
            if waited is not None:
                waited["wait"] = waited.get("wait", 0.0) + time.monotonic() - t0
            _held.mode = mode
            try:
                yield
            finally:
                _held.mode = None
        finally:
            _unrecord(record)
    finally:
        for fd in (main, gate):
            if fd is not None:
                os.close(fd)  # closing the fd releases its flock
