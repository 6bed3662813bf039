"""The docker sandbox: one fresh container per evaluation (a session), on a Docker engine, local or
remote (`DOCKER_HOST=ssh://user@host`). Files move through the API (put_archive / get_archive),
never through host bind mounts, so the engine may sit on other hardware.

How a session goes, and why:
- A tmpfs-backed volume, capped in bytes and inodes, is mounted at the evaluator's work root (the
  same absolute path as on the host), so commands and the names they print agree. The engine mounts
  a tmpfs volume only while a running container uses it, so the container's main process is a
  holder (`sleep`, as `nobody`, under the engine's init) and every command runs as an exec.
- Each command (a step: one compile, one run of the driver) gets its directory put into the
  container, runs as an exec under a uid of its own (SANDBOX_UID + step number), and its directory
  comes back out. Its directory is mode 0700 and owned by that uid, so no later step (a later
  candidate run, or the baseline) can read it, and nothing the step leaves can signal a later one.
- A shell wrapper sets the step's rlimits, runs the command, then SIGKILLs every process of the
  step's uid and removes what the uid left in /tmp, /dev/shm, /dev/mqueue and System V IPC. Two
  checks do not rely on the wrapper (the command shares its uid and could stop it): after the
  step the engine's own process list (`top`) must show nothing but init and the holder, and before
  the next step those shared places must be empty. If either fails, the container is thrown away
  and the next step starts in a fresh one. So a step sees exactly what it would see in a container
  of its own: its files, the image, nothing left by earlier steps.
- The wall clock is the host's: past it the container is killed (the whole pid namespace), the step
  reports a timeout and its files are not copied back; the next step gets a fresh container.
- Container and volume are removed when the session ends (in `finally`); leftovers of orchestrators
  that died (SIGKILL) are removed by `reap()` the first time a DockerSandbox is created in a process.
- `DockerSandbox.run()` outside a session is a session of one step.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import signal
import socket
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import IO, Any

from kernopt.errors import InfraError, UserError
from kernopt.sandbox.archive import extract, pack
from kernopt.sandbox.base import ExecResult, Limits
from kernopt.sandbox.image import SANDBOX_UID, has_image, image_tag
from kernopt.sandbox.local import BASE_PATH, _Capture
from kernopt.sandbox.tree import remove_tree

OWNER = "kernopt.owner"
HOLDER_USER = "65534:65534"  # nobody: no step's uid can signal it
HOLDER_S = 86400  # the holder ends by itself after a day: even a container nobody reaps stops
DEFAULT_MEMORY_MB = 8192  # cgroup limit of a session (per step: an address-space rlimit) or of a run with memory_mb=None
NOT_FOUND_RC = 127  # the shell's "command not found"
NOT_CLEAN_RC, NOT_CLEAN = 199, "kernopt-sandbox: not clean"
SHARED = "/dev/shm /dev/mqueue"  # the only places outside its directory where a step can write (the root is read-only)
UIDS_PER_CONTAINER = 5000  # steps get SANDBOX_UID, SANDBOX_UID+1, ...; a session past this starts a fresh container
# One step, run as its own uid with the volume's root as its current directory. $1: the marker that
# ends the command's stdout; $2: the step's directory ("." in a one-step session); $3-$7: cpu seconds,
# address space (KiB or "unlimited"), processes of the uid, open files, file size (512-byte blocks);
# then the command. Before it: the shared places must be empty, and the directory's files arrive as a
# tar on stdin. After it: kill everything of the uid (kill -1 spares the caller, init and the holder),
# remove what the uid left in the shared places, then send the directory back as a tar on stdout,
# after the marker, and remove it. One exec per step: the engine's archive calls cost as much each.
WRAPPER = (f'if [ -n "$(find {SHARED} -mindepth 1 -maxdepth 1 2>/dev/null)" ] || ipcs | grep -q "^0x"; then '
           f'echo "{NOT_CLEAN}" >&2; exit {NOT_CLEAN_RC}; fi; '
           'm=$1; d=$2; shift 2; umask 077; '
           f'{{ [ "$d" = . ] || mkdir -- "$d"; }} && tar -x -p -f - -C "$d" && cd -- "$d" || {{ echo "{NOT_CLEAN}" >&2; exit {NOT_CLEAN_RC}; }}; '
           'ulimit -t "$1"; ulimit -v "$2"; ulimit -p "$3"; ulimit -n "$4"; ulimit -f "$5"; shift 5; '
           '"$@" </dev/null; rc=$?; kill -9 -1 2>/dev/null; '
           f'find {SHARED} -mindepth 1 -maxdepth 1 -user "$(id -u)" -exec rm -rf {{}} + 2>/dev/null; ipcrm --all 2>/dev/null; '
           'printf "\\n%s\\n" "$m"; tar -c -f - . 2>/dev/null; '
           '[ "$d" = . ] || { cd .. && chmod -R u+rwx -- "$d" && rm -rf -- "$d"; } 2>/dev/null; exit $rc')
_REAPED: set[str] = set()  # engines already reaped by this process (reaping is idempotent; this only saves time)


class EngineUnavailable(UserError):
    """No Docker engine answers: the user starts one or chooses the local sandbox."""


def connect(timeout_s: float = 60.0) -> Any:
    """A docker client that has answered a ping, or EngineUnavailable with what to do."""
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    try:
        import docker
    except ImportError:
        raise EngineUnavailable("the docker sandbox needs the docker Python package (pip install 'docker>=7'); "
                                "or choose --sandbox local explicitly") from None
    try:
        # Over ssh every pooled connection is an ssh session, and the SDK keeps one pool per URL (each
        # exec has its own) plus the exec's stream: 8 pools stay under sshd's default MaxSessions 10.
        pools = {"num_pools": 8} if host.startswith("ssh://") else {}
        client = docker.DockerClient(timeout=int(timeout_s), **pools, **docker.utils.kwargs_from_env())
        client.ping()
    except Exception as e:  # DockerException, requests' ConnectionError, ssh failures: all "not reachable"
        text = str(e)
        errno_text = re.findall(r"Error\(\d+, '([^']+)'\)|\[Errno -?\d+\] ([^'\"]+)", text)  # the wrapped OSError says it plainly
        errno_text = [a or b for a, b in errno_text]
        reason = errno_text[-1] if errno_text else (text.strip().splitlines() or [type(e).__name__])[0][:160]
        if "paramiko" in text:
            raise EngineUnavailable(f"DOCKER_HOST={host} needs ssh support: pip install 'kernopt[ssh]' (paramiko)") from None
        raise EngineUnavailable(f"no Docker engine reachable at {host} ({reason}): start one (`sudo systemctl start docker` "
                                f"or `sudo dockerd &`), point DOCKER_HOST at one, or choose --sandbox local explicitly") from None
    return client


def _start_time(pid: int) -> str:
    """The process's start time in clock ticks ("" if it is gone): a pid plus this names one process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def host_id() -> str:
    """This machine, for the reaper: hostnames repeat across machines sharing a remote engine; machine ids do not."""
    try:
        return f"{socket.gethostname()}/{Path('/etc/machine-id').read_text().strip()}"
    except OSError:
        return socket.gethostname()


def owner_labels() -> dict[str, str]:
    pid = os.getpid()
    return {OWNER: "kernopt", "kernopt.host": host_id(), "kernopt.pid": str(pid),
            "kernopt.pidstart": _start_time(pid), "kernopt.started": str(int(time.time()))}


def _owner_alive(labels: dict[str, str]) -> bool:
    if labels.get("kernopt.host") != host_id():
        return True  # another machine's orchestrator: we cannot tell, so we leave it
    try:
        pid = int(labels.get("kernopt.pid", ""))
    except ValueError:
        return False
    return _start_time(pid) == labels.get("kernopt.pidstart") != ""


def reap(client: Any) -> int:
    """Remove containers and volumes of this tool whose orchestrator (on this host) is dead. Returns how many."""
    import docker

    n = 0
    for c in client.containers.list(all=True, filters={"label": f"{OWNER}=kernopt"}):
        if not _owner_alive(c.labels):
            try:
                c.remove(force=True)
                n += 1
            except docker.errors.NotFound:
                pass
    for v in client.volumes.list(filters={"label": f"{OWNER}=kernopt"}):
        if not _owner_alive(v.attrs.get("Labels") or {}):
            try:
                v.remove(force=True)
                n += 1
            except docker.errors.APIError:  # gone, or still used by a container another process is removing
                pass
    return n


def _engine_errors() -> tuple[type[BaseException], ...]:
    """What a failing engine or transport raises (ssh engines add paramiko's errors)."""
    import docker
    import requests

    errors: tuple[type[BaseException], ...] = (docker.errors.DockerException, requests.RequestException, OSError)
    try:
        import paramiko

        errors += (paramiko.SSHException,)
    except ImportError:
        pass
    return errors


def _in_workdir(program: str, workdir: Path) -> Path | None:
    """The host path of a program named inside the work directory (./prog, or absolute under it)."""
    if "/" not in program:
        return None  # found on PATH, in the image
    path = workdir / program
    return path if not program.startswith("/") or workdir in path.parents else None


def _not_started(why: str) -> ExecResult:
    return ExecResult(returncode=None, stderr=f"cannot start: {why}")


class DockerSandbox:
    """Runs commands in containers of the kernopt-cpu image: one container per session. See the module docstring."""

    name = "docker"

    def __init__(self, image: str | None = None, work_mb: int = 1024, cpus: float | None = None,
                 gpus: bool = False, client: Any = None) -> None:
        self.client = client or connect()
        self.image = image or image_tag()
        if not has_image(self.client, self.image):
            raise UserError(f"sandbox image {self.image} is not on the Docker engine: build it with `kernopt sandbox build` "
                            "(add --offline where no image registry is reachable)")
        self.work_mb, self.gpus = work_mb, gpus
        self.cpus = cpus or float(self.client.info().get("NCPU") or os.cpu_count() or 1)
        engine = os.environ.get("DOCKER_HOST") or self.client.api.base_url  # every ssh engine's base_url is the same
        if engine not in _REAPED:
            reap(self.client)
            _REAPED.add(engine)

    def session(self, root: Path) -> DockerSession:
        """One container for the steps whose work directories are `root`'s children (an evaluation)."""
        return DockerSession(self, Path(root).resolve())

    def run(self, command: list[str], workdir: Path, limits: Limits, env: dict[str, str] | None = None) -> ExecResult:
        """A session of one step, in a container of its own."""
        with DockerSession(self, Path(workdir).resolve(), memory_mb=limits.memory_mb or DEFAULT_MEMORY_MB, single=True) as s:
            return s.run(command, workdir, limits, env)


class DockerSession:
    """Steps of one evaluation in one container; each step as isolated as in a container of its own.

    Work directories must be `root` itself (a one-step session) or its children; others run in a
    container of their own. Not for concurrent use: steps run one after another."""

    name = "docker"

    def __init__(self, sandbox: DockerSandbox, root: Path, memory_mb: int = DEFAULT_MEMORY_MB, single: bool = False) -> None:
        self.sandbox, self.client, self.root, self.memory_mb, self.single = sandbox, sandbox.client, root, memory_mb, single
        self.cpus = sandbox.cpus
        self.container: Any = None
        self.volume: Any = None
        self.steps = 0  # uids handed out in the current container

    def __enter__(self) -> DockerSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def session(self, root: Path) -> contextlib.nullcontext[DockerSession]:
        return contextlib.nullcontext(self)  # already one

    def close(self) -> None:
        self._discard()

    # ------------------------------------------------------------ container
    def _start(self, limits: Limits) -> Any:
        import docker

        if self.container is not None and self.steps >= UIDS_PER_CONTAINER:
            self._discard()
        if self.container is not None:
            return self.container
        sb, name, labels = self.sandbox, f"kernopt-{uuid.uuid4().hex[:16]}", owner_labels()
        inodes = max(4096, sb.work_mb * 64)
        # Root-owned 1733 (like /tmp, but nobody may list it): each step creates its directory (its
        # own uid, 0700), reachable by that step only. A one-step session's directory is the volume.
        owner = f"uid={SANDBOX_UID},gid={SANDBOX_UID},mode=0700" if self.single else "uid=0,gid=0,mode=1733"
        self.volume = self.client.volumes.create(
            name=name, driver="local", labels=labels,
            driver_opts={"type": "tmpfs", "device": "tmpfs", "o": f"size={sb.work_mb}m,nr_inodes={inodes},{owner}"})
        memory = self.memory_mb << 20
        self.container = self.client.containers.create(
            sb.image, ["sleep", str(HOLDER_S)], name=name, labels=labels, user=HOLDER_USER, init=True,
            working_dir="/", environment={"PATH": BASE_PATH, "LANG": "C.UTF-8"}, hostname="sandbox",
            network_mode="none", read_only=True, cap_drop=["ALL"], security_opt=["no-new-privileges"],
            pids_limit=limits.max_procs + 4,  # + init, holder, wrapper, one spare
            mem_limit=memory, memswap_limit=memory, nano_cpus=int(sb.cpus * 1e9), shm_size="64m",
            ulimits=[docker.types.Ulimit(name="core", soft=0, hard=0)],  # the others: per step, by the wrapper
            mounts=[docker.types.Mount(str(self.root), name, type="volume")],
            log_config=docker.types.LogConfig(type="json-file", config={"max-size": "1m", "max-file": "1"}),
            device_requests=[docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])] if sb.gpus else None)
        self.steps = 0
        self.container.start()
        return self.container

    def _discard(self) -> None:
        """Remove the container and its volume (the next step starts a fresh pair)."""
        import docker
        import requests

        container, volume, self.container, self.volume = self.container, self.volume, None, None
        for obj in (container, volume):
            if obj is None:
                continue
            for attempt in range(3):
                try:
                    obj.remove(force=True)
                    break
                except docker.errors.NotFound:
                    break
                except (docker.errors.APIError, requests.RequestException):
                    time.sleep(0.2 * (attempt + 1))  # left for reap() if it keeps failing

    def _only_holder_left(self, container: Any) -> bool:
        """The engine's own process list (not the step's word): nothing but init and the holder."""
        for _ in range(50):  # SIGKILLed processes take a moment to be reaped
            procs = container.top(ps_args="-o pid,uid")["Processes"] or []
            if all(p[1] in ("0", "65534") for p in procs):
                return True
            time.sleep(0.02)
        return False

    # ------------------------------------------------------------ one step
    def run(self, command: list[str], workdir: Path, limits: Limits, env: dict[str, str] | None = None) -> ExecResult:
        workdir = Path(workdir).resolve()
        if not workdir.is_dir():
            return _not_started(f"no directory {workdir}")
        if workdir != self.root if self.single else workdir.parent != self.root:
            return self.sandbox.run(command, workdir, limits, env)
        local = _in_workdir(command[0], workdir)
        if local is not None and not (local.is_file() and os.access(local, os.X_OK)):  # before the command could remove it
            return _not_started(f"{command[0]}: no such executable in {workdir}")
        try:
            for attempt in (1, 2):
                container = self._start(limits)
                uid = SANDBOX_UID + self.steps
                self.steps += 1
                child_env = {"PATH": BASE_PATH, "HOME": str(workdir), "TMPDIR": str(workdir), "LANG": "C.UTF-8", **(env or {})}
                with tempfile.TemporaryFile(prefix="kernopt-out-") as back:
                    result, complete = self._exec(container, command, workdir, limits, child_env, uid, back)
                    if result.timed_out:
                        self._discard()  # killed: the next step gets a fresh container
                        return result
                    if attempt == 1 and result.returncode == NOT_CLEAN_RC and result.stderr.startswith(NOT_CLEAN):
                        self._discard()  # an earlier step got past its wrapper's clean-up: start over in a fresh container
                        continue
                    clean = complete and self._only_holder_left(container)
                    note = self._collect(back, workdir) if complete else ""
                break
            if not clean:
                # The wrapper did not finish (the command killed it) or something outlived it: its
                # clean-up cannot be trusted, so the container goes; the next step gets a fresh one.
                self._discard()
                if complete:
                    note += "\nkernopt: processes outlived the command and were killed with its container"
            if note.strip():
                result.stderr += ("\n" if result.stderr else "") + note.strip()
            return result
        except _engine_errors() as e:
            # The engine went away or refused: an infrastructure failure, never the candidate's.
            self._discard()
            return _not_started(f"docker engine: {type(e).__name__}: {str(e).strip()[:300]}")

    def _exec(self, container: Any, command: list[str], workdir: Path, limits: Limits, env: dict[str, str], uid: int,
              back: IO[bytes]) -> tuple[ExecResult, bool]:
        """Run one step; the directory's files come back as a tar into `back`. Returns the result and
        whether the wrapper finished (sent the marker): only then are its files and clean-up trusted."""
        import docker
        from docker.utils.socket import frames_iter

        cpu_s = limits.cpu_s if limits.cpu_s is not None else math.ceil(limits.wall_s * self.sandbox.cpus) + 1
        rlimits = [str(cpu_s), str(limits.memory_mb << 10) if limits.memory_mb else "unlimited", str(limits.max_procs + 1),
                   str(limits.max_open_files), str(limits.max_file_mb << 11)]
        marker = f"kernopt-end-{uuid.uuid4().hex}"
        where = "." if workdir == self.root else workdir.name
        api = self.client.api
        exec_id = api.exec_create(container.id, ["sh", "-c", WRAPPER, "kernopt-run", marker, where, *rlimits, *command],
                                  stdin=True, user=f"{uid}:{uid}", workdir=str(self.root), environment=env)["Id"]
        sock = api.exec_start(exec_id, socket=True)
        out, err = _Capture(limits.output_bytes), _Capture(limits.output_bytes)
        stdout = _Split(out, f"\n{marker}\n".encode(), back, (self.sandbox.work_mb + 64) << 20)
        failed: list[BaseException] = []

        def send() -> None:
            try:
                _send_and_close(sock, pack(workdir))
            except Exception:  # the wrapper stopped reading (it found the container not clean): its answer says so
                pass

        def pump() -> None:
            try:
                for stream, data in frames_iter(sock, tty=False):
                    if stream == 2:
                        err.feed(data)
                    else:
                        stdout.feed(data)
            except Exception as exc:  # reported by the caller's thread
                failed.append(exc)

        start = time.monotonic()
        threading.Thread(target=send, name=f"kernopt-in-{container.name}", daemon=True).start()
        reader = threading.Thread(target=pump, name=f"kernopt-out-{container.name}", daemon=True)
        reader.start()
        try:
            reader.join(limits.wall_s)
            wall = time.monotonic() - start
            if reader.is_alive():  # the host's wall clock: kill the whole container
                try:
                    container.kill()
                except docker.errors.APIError:  # it ended on its own at that very moment
                    pass
                reader.join(10)
                return ExecResult(returncode=-signal.SIGKILL, stdout=out.text(), stderr=err.text(), timed_out=True, wall_s=wall,
                                  truncated=out.truncated or err.truncated), False
        finally:
            sock.close()
        stdout.end()
        if failed:
            raise failed[0]
        rc = None
        for _ in range(200):  # the stream ends a moment before the engine records the exit code
            info = api.exec_inspect(exec_id)
            if not info.get("Running"):
                rc = info.get("ExitCode")
                break
            time.sleep(0.01)
        stderr = err.text()
        if rc is None:
            return _not_started("docker engine: the exec never reported an exit code"), False
        if rc == NOT_FOUND_RC and _in_workdir(command[0], workdir) is None and not self._exists(container, command[0], uid):
            return _not_started(f"{command[0]}: not found in the sandbox image"), False
        if 128 < rc <= 128 + 64:  # the shell's way of saying "killed by signal rc-128"
            rc = -(rc - 128)
        if stdout.overflow:
            stderr += f"\nkernopt: the work directory's files exceed {self.sandbox.work_mb + 64} MiB; they were not copied back"
        return ExecResult(returncode=rc, stdout=out.text(), stderr=stderr, wall_s=wall,
                          truncated=out.truncated or err.truncated), stdout.found and not stdout.overflow

    def _exists(self, container: Any, program: str, uid: int) -> bool:
        """Whether the image has `program` (asked after a 127: the image's files are read-only, so the
        answer cannot have been arranged by the command; a program may exit 127 by itself)."""
        r = container.exec_run(["sh", "-c", 'command -v "$1"', "exists", program], user=f"{uid}:{uid}", workdir="/")
        return bool(r.exit_code == 0)

    def _collect(self, back: IO[bytes], workdir: Path) -> str:
        """Replace the host workdir's contents with the step's (what the local sandbox leaves)."""
        back.seek(0)
        incoming = Path(tempfile.mkdtemp(prefix=".kernopt-incoming-", dir=workdir))
        try:
            note = extract(iter(lambda: back.read(1 << 20), b""), incoming, (self.sandbox.work_mb + 64) << 20)
            for entry in os.scandir(workdir):
                if entry.path != str(incoming):
                    remove_tree(Path(entry.path))  # any depth, any modes: iterative, never following a link
            for entry in os.scandir(incoming):
                os.rename(entry.path, workdir / entry.name)
        finally:
            with contextlib.suppress(InfraError):
                remove_tree(incoming)
        return note


class _Split:
    """A step's stdout: the command's output up to the marker (into a capture), the tar after it (into a file)."""

    def __init__(self, out: _Capture, marker: bytes, back: IO[bytes], limit: int) -> None:
        self.out, self.marker, self.back, self.limit = out, marker, back, limit
        self.hold, self.found, self.written, self.overflow = b"", False, 0, False

    def feed(self, data: bytes) -> None:
        if self.found:
            self._keep(data)
            return
        buf = self.hold + data
        i = buf.find(self.marker)
        if i >= 0:
            self.out.feed(buf[:i])
            self.found, self.hold = True, b""
            self._keep(buf[i + len(self.marker):])
            return
        cut = max(0, len(buf) - len(self.marker) + 1)  # a marker split across chunks stays whole in `hold`
        self.out.feed(buf[:cut])
        self.hold = buf[cut:]

    def _keep(self, data: bytes) -> None:
        self.written += len(data)
        if self.written > self.limit:
            self.overflow = True
        elif data:
            self.back.write(data)

    def end(self) -> None:
        if not self.found:
            self.out.feed(self.hold)
            self.hold = b""


def _send_and_close(sock: Any, data: bytes) -> None:
    """Write the exec's stdin and close it (half-close: the answer still comes back)."""
    raw = getattr(sock, "_sock", sock)  # unix/tcp: the socket under a SocketIO; ssh: a paramiko channel
    raw.sendall(data)
    if hasattr(raw, "shutdown_write"):
        raw.shutdown_write()
    else:
        raw.shutdown(socket.SHUT_WR)
