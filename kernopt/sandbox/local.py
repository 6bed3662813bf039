"""The local sandbox: run a command on this machine under rlimits, a scrubbed environment, a private
uid (when the orchestrator is root) and a hard wall clock, then kill everything it left behind.

Not contained here (the docker sandbox is for that): network access, disk usage beyond one file's
size (RLIMIT_FSIZE) and inode count. Without root there is no uid switch: processes that drop the
marker variable (execve with an empty environment) and escape the process group can survive.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import grp
import math
import os
import pwd
import re
import resource
import select
import shutil
import signal
import stat
import subprocess
import time
import uuid
from pathlib import Path

from kernopt.sandbox.base import ExecResult, Limits

MARKER = "KERNOPT_SANDBOX"
BASE_PATH = "/usr/local/bin:/usr/bin:/bin"
# One private uid per concurrent run, not the shared `nobody`: RLIMIT_NPROC counts per uid, so a
# fork bomb in one run cannot starve another, kill(-1) reaches only the run's own processes, and
# everything still running as that uid at teardown is known to be the run's. 65000-65533 are
# reserved on Debian-like systems; any uid with a passwd/group entry is skipped.
UID_BASE, UID_SLOTS = 65000, 512
LOCK_DIR = "/run/kernopt-sandbox"
SHARED_TMP = ("/tmp", "/var/tmp", "/dev/shm")
_CHUNK = 1 << 20
_LIBC = ctypes.CDLL(None, use_errno=True)


class _Capture:
    """Keeps the first and the last halves of a stream: memory stays bounded whatever is written."""

    def __init__(self, limit: int) -> None:
        self.head_max, self.tail_max = limit // 2, limit - limit // 2
        self.head, self.tail, self.total = bytearray(), bytearray(), 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_max - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        self.tail += data
        if len(self.tail) > 2 * self.tail_max:  # trim rarely: amortised O(1) per byte
            del self.tail[: -self.tail_max]

    @property
    def truncated(self) -> bool:
        return self.total > self.head_max + self.tail_max

    def text(self) -> str:
        if not self.truncated:
            return (self.head + self.tail).decode(errors="replace")
        tail = bytes(self.tail[-self.tail_max :])
        dropped = self.total - len(self.head) - len(tail)
        return f"{self.head.decode(errors='replace')}\n[... {dropped} bytes truncated ...]\n{tail.decode(errors='replace')}"


def _become_subreaper() -> None:
    # Orphans of killed sandbox processes are reparented to us instead of pid 1, so we can reap them
    # (by uid): an init that never reaps (as in some VMs) would keep their zombies, and zombies count
    # against the uid's RLIMIT_NPROC forever. Process-wide and idempotent. Root only: without a
    # private uid, zombies cannot be told from other children, so they are better left to pid 1.
    _LIBC.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


_STATUS = re.compile(rb"^State:\s+(\S).*?^PPid:\s+(\d+).*?^Uid:\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+).*?^Threads:\s+(\d+)", re.M | re.S)


def _procs() -> list[tuple[int, bytes, int, set[int], int]]:
    """(pid, state, ppid, {real, effective, saved, fs uid}, threads) of every process but us."""
    out, me = [], os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        m = _STATUS.search(_read(f"/proc/{name}/status"))
        if m:
            out.append((int(name), m[1], int(m[2]), {int(m[i]) for i in range(3, 7)}, int(m[7])))
    return out


def _read(path: str) -> bytes:
    """A /proc file's contents, b"" if the process is gone (os.open: twice as fast as open())."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return b""
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:
        return b""
    finally:
        os.close(fd)


def _reap(uid: int | None, needle: bytes | None, budget_s: float = 5.0) -> int:
    """SIGKILL every process running as `uid` or carrying the marker, reap those reparented to us;
    repeat until none is left alive (fork bombs race the first rounds). Returns how many are left:
    zombies we cannot reap (their parent is pid 1), or live ones after `budget_s`."""
    end, delay, me = time.monotonic() + budget_s, 0.0005, os.getpid()
    killed: set[int] = set()  # zombies have an empty environ: recognise the ones we killed by pid
    while True:
        live = left = 0
        for pid, state, ppid, uids, threads in _procs():
            zombie = state == b"Z" and threads <= 1  # a zombie leader with live threads is still live
            if not ((uid is not None and uid in uids) or pid in killed
                    or (needle and not zombie and needle in _read(f"/proc/{pid}/environ"))):
                continue
            if zombie:
                try:
                    if ppid != me or os.waitpid(pid, os.WNOHANG)[0] == 0:
                        left += 1
                except ChildProcessError:
                    left += 1
                continue
            live += 1
            killed.add(pid)
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if not live or time.monotonic() > end:
            return left + live
        time.sleep(delay)
        delay = min(2 * delay, 0.05)


def _acquire_uid() -> tuple[int, int]:
    """A free private uid and the open lock file that holds it (flock: across threads and processes)."""
    os.makedirs(LOCK_DIR, mode=0o700, exist_ok=True)  # in /run: only root can create or lock these
    named = {p.pw_uid for p in pwd.getpwall()} | {g.gr_gid for g in grp.getgrall()}
    for uid in sorted(set(range(UID_BASE, UID_BASE + UID_SLOTS)) - named):
        fd = os.open(f"{LOCK_DIR}/{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return uid, fd
    raise RuntimeError("no free sandbox uid")


def _chown_tree(top: Path, uid: int, gid: int, only_from: int | None) -> None:
    """lchown `top` and everything under it. Never follows symlinks; before a run, skips hard links
    (they may point outside); after one (`only_from` = sandbox uid), touches only that uid's files
    and drops setuid/setgid and group/other write bits, so a later run cannot alter them."""
    os.chown(top, uid, gid, follow_symlinks=False)
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            try:
                st = os.lstat(path)
                if only_from is None and stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                    continue
                if only_from is not None and only_from not in (st.st_uid, st.st_gid):
                    continue
                os.chown(path, uid, gid, follow_symlinks=False)
                mode = stat.S_IMODE(st.st_mode)
                if only_from is not None and not stat.S_ISLNK(st.st_mode) and mode & 0o6022:
                    os.chmod(path, mode & ~0o6022)
            except OSError:
                continue


def _clean_shared_tmp(uid: int) -> None:
    # Files the run left in world-writable directories; the uid is private, so they are its own.
    for top in SHARED_TMP:
        try:
            entries = list(os.scandir(top))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
            except OSError:
                continue


def _rlimits(limits: Limits, nproc: int) -> list[tuple[int, int, int]]:
    cpu = limits.cpu_s if limits.cpu_s is not None else math.ceil(limits.wall_s * (os.cpu_count() or 1)) + 1
    wanted = [(resource.RLIMIT_CPU, cpu, cpu + 1), (resource.RLIMIT_NPROC, nproc, nproc),
              (resource.RLIMIT_FSIZE, limits.max_file_mb << 20, limits.max_file_mb << 20),
              (resource.RLIMIT_NOFILE, limits.max_open_files, limits.max_open_files), (resource.RLIMIT_CORE, 0, 0)]
    if limits.memory_mb is not None:  # None: ThreadSanitizer reserves terabytes of address space
        wanted.append((resource.RLIMIT_AS, limits.memory_mb << 20, limits.memory_mb << 20))
    out = []
    for res, soft, hard in wanted:  # the child is unprivileged by then: it can only lower limits
        cur = resource.getrlimit(res)[1]
        cap = hard if cur == resource.RLIM_INFINITY else min(hard, cur)
        out.append((res, min(soft, cap), cap))
    return out


def _not_started(why: str) -> ExecResult:
    return ExecResult(returncode=None, stderr=f"cannot start: {why}")


class LocalSandbox:
    """Runs commands on this machine. As root: under a private unprivileged uid per run, with the
    workdir lent to that uid; otherwise as the current user. See the module docstring for limits."""

    name = "local"
    cpus = float(os.cpu_count() or 1)

    def session(self, root: Path) -> contextlib.nullcontext[LocalSandbox]:
        return contextlib.nullcontext(self)  # nothing to share: every run is set up on its own

    def run(self, command: list[str], workdir: Path, limits: Limits, env: dict[str, str] | None = None) -> ExecResult:
        workdir = Path(workdir).resolve()
        marker = uuid.uuid4().hex
        child_env = {"PATH": BASE_PATH, "HOME": str(workdir), "TMPDIR": str(workdir), "LANG": "C.UTF-8",
                     **(env or {}), MARKER: marker}
        if os.geteuid() != 0:
            # RLIMIT_NPROC counts all of this user's threads; concurrent runs share that count.
            nproc = limits.max_procs + sum(t for _, _, _, u, t in _procs() if os.getuid() in u)
            return self._execute(command, workdir, child_env, limits, nproc, None, marker)
        if not workdir.is_dir():
            return _not_started(f"no directory {workdir}")
        blocked = next((p for p in workdir.parents if not p.stat().st_mode & stat.S_IXOTH), None)
        if blocked is not None:
            return _not_started(f"the sandbox user cannot enter {workdir}: {blocked} lacks o+x")
        mode = stat.S_IMODE(workdir.stat().st_mode)
        _become_subreaper()
        uid, lock_fd = _acquire_uid()
        try:
            stale = _reap(uid, None)  # leftovers of an orchestrator that died holding this uid
            _chown_tree(workdir, uid, uid, None)
            os.chmod(workdir, 0o700)  # concurrent runs (other uids) cannot look in
            nproc = limits.max_procs + stale  # zombies count against RLIMIT_NPROC too
            return self._execute(command, workdir, child_env, limits, nproc, uid, marker)
        finally:  # _execute has killed everything it started
            _chown_tree(workdir, os.geteuid(), os.getegid(), uid)
            os.chmod(workdir, mode)
            _clean_shared_tmp(uid)
            os.close(lock_fd)

    def _execute(self, command: list[str], workdir: Path, env: dict[str, str], limits: Limits, nproc: int,
                 uid: int | None, marker: str) -> ExecResult:
        rlimits = _rlimits(limits, nproc)

        # In the child after fork and the uid switch. preexec_fn is "unsafe with threads" because the
        # child may need a lock another thread held at fork; setrlimit on prebuilt ints takes none.
        def preexec() -> None:
            for res, soft, hard in rlimits:
                resource.setrlimit(res, (soft, hard))

        start = time.monotonic()
        try:
            proc = subprocess.Popen(command, cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True, preexec_fn=preexec, user=uid,  # noqa: PLW1509
                                    group=uid, extra_groups=[] if uid is not None else None)
        except (OSError, subprocess.SubprocessError) as exc:
            return _not_started(str(exc))
        assert proc.stdout is not None and proc.stderr is not None
        out_cap, err_cap = _Capture(limits.output_bytes), _Capture(limits.output_bytes)
        caps = {proc.stdout.fileno(): out_cap, proc.stderr.fileno(): err_cap}  # the pipes still open
        poller = select.poll()
        for fd in caps:
            poller.register(fd, select.POLLIN)
            try:
                fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _CHUNK)  # fewer, bigger reads when flooded
            except OSError:
                pass
        pidfd: int | None = None
        try:
            pidfd = os.pidfd_open(proc.pid)  # readable when the child exits: no polling
            poller.register(pidfd, select.POLLIN)
        except OSError:
            pass

        def pump(timeout_s: float) -> None:
            for fd, _ in poller.poll(max(timeout_s, 0) * 1000):
                if fd in caps:
                    data = os.read(fd, _CHUNK)
                    if data:
                        caps[fd].feed(data)
                    else:
                        poller.unregister(fd)
                        del caps[fd]

        deadline, timed_out = start + limits.wall_s, False
        returncode: int | None = None
        try:
            while proc.poll() is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    timed_out = True
                    break
                pump(left if pidfd is not None else min(left, 0.02))
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the whole group, at once
            except OSError:
                pass
            try:
                returncode = proc.wait(timeout=10)  # before _reap, which must not steal this status
            except subprocess.TimeoutExpired:
                pass
            wall = time.monotonic() - start
            _reap(uid, f"{MARKER}={marker}".encode())
            drain_end = time.monotonic() + 1.0  # writers are dead: only buffered data is left
            while caps and time.monotonic() < drain_end:
                pump(drain_end - time.monotonic())
            for f in (proc.stdout, proc.stderr):
                f.close()
            if pidfd is not None:
                os.close(pidfd)
        return ExecResult(returncode=returncode, stdout=out_cap.text(), stderr=err_cap.text(), timed_out=timed_out,
                          wall_s=wall, truncated=out_cap.truncated or err_cap.truncated)
