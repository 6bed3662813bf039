"""The local sandbox: run a command on this machine under rlimits, a scrubbed environment, a private
uid (when the orchestrator is root), bubblewrap's namespaces and a hard wall clock, then kill
everything it left behind.

Every command runs inside bubblewrap (bwrap): it sees its work directory (read-write, at the same
absolute path as on the host, so commands and the names they print agree), the read-only runtime it
needs (/usr, the pieces of /etc the compilers, the loader, OpenMPI and Python read, a synthetic
/etc/passwd naming only root and itself, the directories on its PATH and LD_LIBRARY_PATH), a fresh
/proc of its own pid namespace, a minimal /dev, private size-capped tmpfs at /tmp, /var/tmp and
/dev/shm, and no network. Nothing else of the host: no /home, /root, /run, host /tmp. bwrap runs as
the unprivileged user (after the uid switch, as root) in a user namespace of its own, so it needs
no privilege; without bwrap, or where it cannot create its namespaces, nothing runs (fail closed).

As root the work directory is a tmpfs capped in bytes and inodes (Limits.work_mb, max_entries):
the inputs are copied in, the results copied back (bounded in entries and depth, never following a
link, regular files and directories only), and the tmpfs unmounted, which frees whatever the step
made of it at once. Without root (or where mounting is refused) the directory is bound in place and
walked after the step; a tree past the bounds is removed with a note on stderr.

Not contained: CPU time beyond the rlimits, memory beyond the address-space rlimit (tmpfs pages are
the host's), the kernel's attack surface. Without root there is no uid switch: processes that drop
the marker variable and escape the process group are still confined to the pid namespace, which
dies with bwrap.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import glob
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
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from kernopt.errors import InfraError
from kernopt.sandbox.base import ExecResult, Limits
from kernopt.sandbox.tree import TreeBound, chmod_nofollow, clear_dir, copy_tree, remove_tree, walk

MARKER = "KERNOPT_SANDBOX"
BASE_PATH = "/usr/local/bin:/usr/bin:/bin"
# One private uid per concurrent run, not the shared `nobody`: RLIMIT_NPROC counts per uid, so a
# fork bomb in one run cannot starve another, kill(-1) reaches only the run's own processes, and
# everything still running as that uid at teardown is known to be the run's. 65000-65533 are
# reserved on Debian-like systems; any uid with a passwd/group entry is skipped.
UID_BASE, UID_SLOTS = 65000, 512
LOCK_DIR = "/run/kernopt-sandbox"
# Mount points of the per-uid work tmpfs: root's, 0711, so each sandbox uid (bwrap resolves its bind
# sources as that uid) can reach its own mount, whose root is 0700 and its own, and list none.
STAGE_DIR = "/run/kernopt-sandbox-work"
SHARED_TMP = ("/tmp", "/var/tmp", "/dev/shm")
BWRAP_HINT = "the local sandbox needs bubblewrap (apt-get install bubblewrap)"
# What of /etc a step sees (read-only): the dynamic loader's cache and configuration, the
# alternatives that name cc, c++ and mpirun, OpenMPI's defaults, the time zone, Debian's Python
# configuration (its sitecustomize is a link into /etc). passwd, group, hosts and nsswitch.conf are
# synthetic (_etc_data): the host's list every account.
ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "openmpi", "localtime", "python3*")
# Top-level directories that merged-/usr systems make links into /usr (bound as they are otherwise).
ROOT_DIRS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
# CPU and NUMA topology (libgomp's OMP_PLACES, OpenMPI's hwloc read it): the only part of /sys shown
# on a machine without a GPU.
SYS_TOPOLOGY = ("/sys/devices/system/cpu", "/sys/devices/system/node")
# Never shown whole, whatever a PATH says: the host's configuration, state and sockets, its kernel interfaces.
HOST_STATE = ["/etc", "/run", "/proc", "/sys", "/dev", "/boot", "/root"]
BWRAP_PROCS = 2  # bwrap itself and its init in the pid namespace, under the step's process limit too
TREE_TIMEOUT_S = 120.0  # for each copy or walk of a work directory (bounded in entries: normally milliseconds)
_CHUNK = 1 << 20
_LIBC = ctypes.CDLL(None, use_errno=True)
_MS_NOSUID, _MS_NODEV, _MNT_DETACH = 2, 4, 2
_PROBED: dict[str, str] = {}  # bwrap path -> "" (it works here) or why not; asked once per process
_PROBE_LOCK = threading.Lock()


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


def _chown_tree(top: Path, uid: int, gid: int, only_from: int | None, limits: Limits) -> None:
    """lchown `top` and everything under it, iteratively through directory fds (a step may leave a
    tree deeper than any recursion or PATH_MAX). Never follows symlinks; before a run, skips hard
    links (they may point outside); after one (`only_from` = sandbox uid), touches only that uid's
    files and drops setuid/setgid and group/other write bits, so a later run cannot alter them.
    Raises TreeBound past the limits' entries or depth, InfraError if the tree cannot be walked."""
    os.chown(top, uid, gid, follow_symlinks=False)

    def visit(dir_fd: int, name: str, st: os.stat_result) -> bool:
        descend = stat.S_ISDIR(st.st_mode)  # an entry not to touch may still hold ones to touch
        if only_from is None and stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
            return False
        if only_from is not None and only_from not in (st.st_uid, st.st_gid):
            return descend
        with contextlib.suppress(OSError):
            os.chown(name, uid, gid, dir_fd=dir_fd, follow_symlinks=False)
            if only_from is not None and stat.S_IMODE(st.st_mode) & 0o6022:
                chmod_nofollow(name, lambda m: m & ~0o6022, dir_fd)
        return descend

    walk(top, visit, max_entries=limits.max_entries, max_depth=limits.max_depth, timeout_s=TREE_TIMEOUT_S)


def _clean_shared_tmp(uid: int) -> None:
    # Files the run left in world-writable directories; the uid is private, so they are its own.
    # bwrap gives every step private ones, so this finds nothing unless that confinement failed.
    for top in SHARED_TMP:
        try:
            entries = list(os.scandir(top))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_uid == uid:
                    remove_tree(Path(entry.path), TREE_TIMEOUT_S)
            except (OSError, InfraError):
                continue


def _bound_tree(workdir: Path, limits: Limits) -> str:
    """After a step that ran in place: the work directory must stay within the limits' entries and
    depth (or a later walk, the evaluator's clean-up among them, could not cope); past them, all of it
    is removed. Returns the note for the step's stderr ("" when within bounds)."""
    try:
        walk(workdir, lambda fd, name, st: stat.S_ISDIR(st.st_mode), max_entries=limits.max_entries,
             max_depth=limits.max_depth, timeout_s=TREE_TIMEOUT_S, fix_perms=True)
        return ""
    except TreeBound as e:
        clear_dir(workdir, TREE_TIMEOUT_S)
        return f"kernopt: the work directory held {e}: everything in it was removed"


def _mount_stage(uid: int, limits: Limits) -> Path | None:
    """A fresh tmpfs for a step's work directory, owned by `uid`, capped in bytes and inodes; None where
    this process may not mount (no CAP_SYS_ADMIN): the work directory is then bound in place."""
    stage = Path(STAGE_DIR, str(uid))
    try:
        os.makedirs(STAGE_DIR, exist_ok=True)
        os.chmod(STAGE_DIR, 0o711)
        _unmount(stage)  # left mounted by an orchestrator that died holding this uid
        stage.mkdir(mode=0o700, exist_ok=True)
    except OSError:
        return None
    opts = f"size={limits.work_mb}m,nr_inodes={limits.max_entries + 1},mode=0700,uid={uid},gid={uid}"
    if _LIBC.mount(b"tmpfs", bytes(stage), b"tmpfs", _MS_NOSUID | _MS_NODEV, opts.encode()) != 0:
        return None
    return stage


def _unmount(stage: Path) -> None:
    # Detached at once (all of the step's processes are dead); the kernel frees the tmpfs's pages with it.
    while _LIBC.umount2(bytes(stage), _MNT_DETACH) == 0:
        pass


def _copy_back(stage: Path, workdir: Path, limits: Limits) -> str:
    """Replace the work directory's contents with the step's (what the step would have left in place):
    directories and regular files only, setuid/setgid and group/other write bits dropped, owned by us.
    Past the limits' entries or depth nothing is copied and the inputs stay. Returns a note for stderr."""
    notes = []
    st = os.statvfs(stage)
    if st.f_favail == 0:
        notes.append(f"kernopt: the work directory ran out of inodes ({limits.max_entries} files and directories)")
    elif st.f_bavail * st.f_frsize < (1 << 20):
        notes.append(f"kernopt: the work directory ran out of space ({limits.work_mb} MiB)")
    incoming = Path(tempfile.mkdtemp(prefix=".kernopt-incoming-", dir=workdir))
    try:
        copy_tree(stage, incoming, mode_mask=0o1755, max_entries=limits.max_entries, max_depth=limits.max_depth,
                  timeout_s=TREE_TIMEOUT_S)
    except TreeBound as e:
        remove_tree(incoming, TREE_TIMEOUT_S)
        return "\n".join([*notes, f"kernopt: the work directory held {e}: its files were not copied back"])
    except InfraError:
        remove_tree(incoming, TREE_TIMEOUT_S)
        raise
    try:
        for entry in os.scandir(workdir):
            if entry.name != incoming.name:
                remove_tree(Path(entry.path), TREE_TIMEOUT_S)
        for name in os.listdir(incoming):
            os.rename(incoming / name, workdir / name)
        os.rmdir(incoming)
    except OSError as e:
        raise InfraError(f"cannot copy a step's files back into {workdir}: {e}") from None
    return "\n".join(notes)


def _etc_data(uid: int, workdir: Path) -> dict[str, bytes]:
    """The synthetic /etc files: glibc and OpenMPI look the user up, OpenMPI resolves the host name."""
    return {"/etc/passwd": (f"root:x:0:0:root:/root:/bin/sh\nkernopt:x:{uid}:{uid}:kernopt sandbox:{workdir}:/bin/sh\n"
                            "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n").encode(),
            "/etc/group": f"root:x:0:\nkernopt:x:{uid}:\nnogroup:x:65534:\n".encode(),
            "/etc/hosts": b"127.0.0.1 localhost sandbox\n::1 localhost ip6-localhost ip6-loopback\n",
            "/etc/nsswitch.conf": b"passwd: files\ngroup: files\nhosts: files\n"}


@contextlib.contextmanager
def _data_fds(data: dict[str, bytes]) -> Iterator[dict[str, int]]:
    """Each synthetic file as the read end of a pipe holding all of it (a few hundred bytes: within the
    pipe's buffer), for bwrap's --ro-bind-data; closed here once bwrap has started."""
    fds: dict[str, int] = {}
    try:
        for path, content in data.items():
            r, w = os.pipe()
            fds[path] = r
            os.write(w, content)
            os.close(w)
        yield fds
    finally:
        for fd in fds.values():
            os.close(fd)


def _reachable(path: str, root: bool) -> bool:
    """Whether the sandbox user can look `path` up: bwrap resolves its bind sources as that user. As
    root that user is a private uid with no groups, so only the "other" search bits count."""
    if not os.path.exists(path):
        return False
    if not root:
        return True  # we are that user, and exists() has just looked it up
    try:
        return all(os.stat(d).st_mode & stat.S_IXOTH for p in (path, os.path.realpath(path)) for d in Path(p).parents)
    except OSError:
        return False


def _under(path: str, tops: list[str]) -> bool:
    return any(path == t or path.startswith(t.rstrip("/") + "/") for t in tops)


def _tool_binds(env: dict[str, str], root: bool) -> list[str]:
    """The directories of the step's PATH and LD_LIBRARY_PATH that /usr does not already hold, as the
    sandbox user can reach them. A venv's bin brings the whole venv (its site-packages) and the prefix
    of the interpreter it was made from (pyvenv.cfg's home: a Python outside /usr, e.g. pyenv's)."""
    shown = ["/usr", *(f"/{d}" for d in ROOT_DIRS if os.path.islink(f"/{d}"))]
    out: list[str] = []
    dirs = [d for var in ("PATH", "LD_LIBRARY_PATH") for d in env.get(var, "").split(os.pathsep) if os.path.isabs(d)]
    for d in dirs:
        d = os.path.normpath(d)
        wanted = [d]
        cfg = Path(d).parent / "pyvenv.cfg"
        if cfg.is_file():
            wanted = [str(cfg.parent)]
            home = next((ln.split("=", 1)[1].strip() for ln in cfg.read_text(errors="replace").splitlines()
                         if ln.split("=", 1)[0].strip() == "home"), "")
            if os.path.isabs(home):
                wanted.append(os.path.dirname(os.path.realpath(home)))
        for w in wanted:
            if (not _under(w, shown + out) and os.path.isdir(w) and _reachable(w, root)
                    and w != "/" and not _under(os.path.realpath(w), HOST_STATE)):
                out.append(w)
    return out


def _find_program(program: str, workdir: Path, path: str, binds: list[str], root: bool) -> str | None:
    """The host path of the step's program, or None if the sandbox would not find it: a name with a
    slash is taken relative to the work directory, a bare name is looked up on the sandbox's PATH."""
    if "/" in program:
        path = os.path.normpath(os.path.join(workdir, program))
        ok = os.path.isfile(path) and os.access(path, os.X_OK) and (_under(path, [str(workdir)]) or _reachable(path, root))
        return path if ok else None
    shown = [*binds, "/usr", *(f"/{d}" for d in ROOT_DIRS)]
    return shutil.which(program, path=os.pathsep.join(d for d in path.split(os.pathsep) if _under(os.path.normpath(d), shown)))


def _bwrap_args(bwrap: str, work: tuple[Path, Path] | None, binds: list[str], files: list[str], data: dict[str, int],
                limits: Limits) -> list[str]:
    """The bwrap command line (before the step's command). `work`: (host source, path in the sandbox)
    of the read-write work directory; `binds`: read-only directories; `files`: read-only single files
    (a program outside the work directory); `data`: path -> fd of a synthetic read-only file."""
    args = [bwrap, "--unshare-user", "--disable-userns", "--unshare-pid", "--unshare-net", "--unshare-ipc",
            "--unshare-uts", "--hostname", "sandbox", "--die-with-parent", "--new-session", "--ro-bind", "/usr", "/usr"]
    for name in ROOT_DIRS:
        top = f"/{name}"
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for pattern in ETC:
        for path in sorted(glob.glob(f"/etc/{pattern}")):
            args += ["--ro-bind", path, path]
    for path, fd in data.items():
        args += ["--perms", "0644", "--ro-bind-data", str(fd), path]
    args += ["--proc", "/proc", "--dev", "/dev"]
    gpus = sorted(glob.glob("/dev/nvidia*"))
    for dev in gpus:  # a GPU, for CUDA steps: its device nodes
        args += ["--dev-bind", dev, dev]
    # With a GPU all of /sys, read-only: NVML (nvidia-smi) and the CUDA driver read the PCI tree and the
    # driver's module there. Without one only the topology.
    for path in ["/sys"] if gpus else SYS_TOPOLOGY:
        args += ["--ro-bind-try", path, path]
    for path in SHARED_TMP:
        args += ["--size", str(limits.tmp_mb << 20), "--tmpfs", path]
    # Parents before children (a venv under the work directory's tree, a program in a bound directory).
    mounts = [(str(p), str(p), "--ro-bind") for p in [*binds, *files]]
    if work is not None:
        mounts.append((str(work[0]), str(work[1]), "--bind"))
    for src, dest, how in sorted(mounts, key=lambda m: m[1].count("/")):
        args += [how, src, dest]
    # The root and /dev are bwrap's own tmpfs: read-only from here on (the mounts on them stay as they are).
    args += ["--remount-ro", "/dev", "--remount-ro", "/"]
    if work is not None:
        args += ["--chdir", str(work[1])]
    return [*args, "--"]


def _probe(bwrap: str, uid: int | None) -> str:
    """Whether bwrap can create its namespaces here, as the sandbox user: "" or bwrap's own words.
    Asked once per process (a host that cannot does not start to mid-run)."""
    with _PROBE_LOCK:
        if bwrap not in _PROBED:
            argv = [*_bwrap_args(bwrap, None, [], [], {}, Limits()), "true"]
            try:
                r = subprocess.run(argv, cwd="/", env={"PATH": BASE_PATH, "LANG": "C.UTF-8"}, stdin=subprocess.DEVNULL,
                                   capture_output=True, timeout=30, user=uid, group=uid,
                                   extra_groups=[] if uid is not None else None)
                lines = r.stderr.decode(errors="replace").strip().splitlines()
                _PROBED[bwrap] = "" if r.returncode == 0 else (lines[0] if lines else f"bwrap exited with {r.returncode}")
            except (OSError, subprocess.SubprocessError) as exc:
                _PROBED[bwrap] = str(exc)
        return _PROBED[bwrap]


def _bwrap_path() -> str | None:
    """bwrap on the orchestrator's PATH (never the step's)."""
    return shutil.which("bwrap")


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
    """Runs commands on this machine, each inside bubblewrap. As root: under a private unprivileged uid
    per run, in a tmpfs work directory lent to that uid; otherwise as the current user, in the work
    directory itself. See the module docstring for what is and is not contained."""

    name = "local"
    cpus = float(os.cpu_count() or 1)

    def session(self, root: Path) -> contextlib.nullcontext[LocalSandbox]:
        return contextlib.nullcontext(self)  # nothing to share: every run is set up on its own

    def run(self, command: list[str], workdir: Path, limits: Limits, env: dict[str, str] | None = None) -> ExecResult:
        workdir = Path(workdir).resolve()
        marker = uuid.uuid4().hex
        child_env = {"PATH": BASE_PATH, "HOME": str(workdir), "TMPDIR": str(workdir), "LANG": "C.UTF-8",
                     **(env or {}), MARKER: marker}
        if not workdir.is_dir():
            return _not_started(f"no directory {workdir}")
        bwrap = _bwrap_path()
        if bwrap is None:  # never unconfined
            return _not_started(f"{BWRAP_HINT}: no bwrap on PATH")
        root = os.geteuid() == 0
        binds = _tool_binds(child_env, root)
        program = _find_program(command[0], workdir, child_env["PATH"], binds, root) if command else None
        if program is None:
            return _not_started(f"{command[0] if command else 'an empty command'}: not found or not executable in the sandbox")
        files = [] if _under(program, [*binds, str(workdir), "/usr", "/bin", "/sbin"]) else [program]
        if not root:
            why = _probe(bwrap, None)
            if why:
                return _not_started(f"{BWRAP_HINT}: {why}")
            # RLIMIT_NPROC counts all of this user's threads; concurrent runs share that count.
            nproc = limits.max_procs + BWRAP_PROCS + sum(t for _, _, _, u, t in _procs() if os.getuid() in u)
            with _data_fds(_etc_data(os.getuid(), workdir)) as data:
                argv = [*_bwrap_args(bwrap, (workdir, workdir), binds, files, data, limits), *command]
                result = self._execute(argv, child_env, limits, nproc, None, marker, list(data.values()))
            return _with_note(result, _bound_tree(workdir, limits))
        blocked = next((p for p in workdir.parents if not p.stat().st_mode & stat.S_IXOTH), None)
        if blocked is not None:
            return _not_started(f"the sandbox user cannot enter {workdir}: {blocked} lacks o+x")
        mode = stat.S_IMODE(workdir.stat().st_mode)
        _become_subreaper()
        uid, lock_fd = _acquire_uid()
        stage: Path | None = None
        lent = False  # the directory itself lent to the uid (no tmpfs), not yet handed back
        try:
            why = _probe(bwrap, uid)
            if why:
                return _not_started(f"{BWRAP_HINT}: {why}")
            stale = _reap(uid, None)  # leftovers of an orchestrator that died holding this uid
            stage = _mount_stage(uid, limits)
            try:
                if stage is not None:
                    copy_tree(workdir, stage, owner=(uid, uid), mode_mask=0o1777, max_entries=limits.max_entries,
                              max_depth=limits.max_depth, timeout_s=TREE_TIMEOUT_S)
                else:  # no tmpfs: the directory itself is lent to the uid
                    lent = True
                    _chown_tree(workdir, uid, uid, None, limits)
                    os.chmod(workdir, 0o700)  # concurrent runs (other uids) cannot look in
            except (TreeBound, InfraError) as e:
                return _not_started(f"the work directory does not fit the sandbox's limits: {e}")
            nproc = limits.max_procs + BWRAP_PROCS + stale  # zombies count against RLIMIT_NPROC too
            with _data_fds(_etc_data(uid, workdir)) as data:
                argv = [*_bwrap_args(bwrap, (stage or workdir, workdir), binds, files, data, limits), *command]
                result = self._execute(argv, child_env, limits, nproc, uid, marker, list(data.values()))
            # _execute has killed everything it started: the tree is still now
            if stage is not None:
                return _with_note(result, _copy_back(stage, workdir, limits))
            try:
                _chown_tree(workdir, os.geteuid(), os.getegid(), uid, limits)
                lent = False
                return result
            except TreeBound as e:
                clear_dir(workdir, TREE_TIMEOUT_S)
                lent = False
                return _with_note(result, f"kernopt: the work directory held {e}: everything in it was removed")
        finally:
            if stage is not None:
                _unmount(stage)
            if lent:  # given back on the way out of a failure, as far as it goes
                with contextlib.suppress(OSError, TreeBound, InfraError):
                    _chown_tree(workdir, os.geteuid(), os.getegid(), uid, limits)
            with contextlib.suppress(OSError):
                os.chmod(workdir, mode)
            _clean_shared_tmp(uid)
            os.close(lock_fd)

    def _execute(self, argv: list[str], env: dict[str, str], limits: Limits, nproc: int, uid: int | None, marker: str,
                 pass_fds: list[int]) -> ExecResult:
        rlimits = _rlimits(limits, nproc)

        # In the child after fork and the uid switch. preexec_fn is "unsafe with threads" because the
        # child may need a lock another thread held at fork; setrlimit on prebuilt ints takes none.
        def preexec() -> None:
            for res, soft, hard in rlimits:
                resource.setrlimit(res, (soft, hard))

        start = time.monotonic()
        try:
            proc = subprocess.Popen(argv, cwd="/", env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True, preexec_fn=preexec, user=uid,  # noqa: PLW1509
                                    group=uid, extra_groups=[] if uid is not None else None, pass_fds=pass_fds)
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
        if returncode is not None and 128 < returncode <= 128 + 64:
            returncode = 128 - returncode  # bwrap's init reports "killed by signal N" as 128+N: -N, as a direct child's
        return ExecResult(returncode=returncode, stdout=out_cap.text(), stderr=err_cap.text(), timed_out=timed_out,
                          wall_s=wall, truncated=out_cap.truncated or err_cap.truncated)


def _with_note(result: ExecResult, note: str) -> ExecResult:
    """The result with kernopt's own note appended to its stderr."""
    if not note:
        return result
    return result.model_copy(update={"stderr": f"{result.stderr}\n{note}" if result.stderr else note})
