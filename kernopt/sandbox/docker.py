"""The docker sandbox: every `run()` in a fresh container on a Docker engine, local or remote
(`DOCKER_HOST=ssh://user@host`). Files move through the API (put_archive / get_archive), never
through host bind mounts, so the engine may sit on other hardware.

How one run goes, and why:
- A tmpfs-backed volume, capped in bytes and inodes, holds the work directory. It is mounted at the
  same absolute path as the host's workdir, so the commands and the names they print agree.
- The engine mounts a tmpfs volume only while a running container uses it (files put into a
  created, not yet started, container are gone when it starts). So the container's main process
  is a holder (`sleep`, as `nobody`, under the engine's init), the files go in, the command runs as
  an exec under the sandbox uid, and the files come back out before the container is removed.
- The command runs under a one-line shell wrapper that SIGKILLs every process of the sandbox uid
  when it exits: a double-forked daemon dies with the command (and cannot hold the output stream
  open). The holder runs under another uid, out of the candidate's reach.
- The wall clock is the host's: past it the container is killed (the whole pid namespace) and the
  run reports a timeout; the work directory's files are then not copied back.
- Container and volume are removed in `finally`; leftovers of orchestrators that died (SIGKILL) are
  removed by `reap()` the first time a DockerSandbox is created in a process.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import signal
import socket
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from kernopt.errors import UserError
from kernopt.sandbox.archive import extract, pack
from kernopt.sandbox.base import ExecResult, Limits
from kernopt.sandbox.image import SANDBOX_UID, has_image, image_tag
from kernopt.sandbox.local import BASE_PATH, _Capture

OWNER = "kernopt.owner"
HOLDER_USER = "65534:65534"  # nobody: the sandbox uid cannot signal it
DEFAULT_MEMORY_MB = 8192  # cgroup limit when Limits.memory_mb is None (ThreadSanitizer): RSS, not address space
NOT_FOUND_RC = 127  # the shell's "command not found"
# Runs the command, then kills whatever of the sandbox uid is left (kill -1 spares the caller and pid 1).
WRAPPER = '"$@"; rc=$?; kill -9 -1 2>/dev/null; exit $rc'
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
        client = docker.from_env(timeout=int(timeout_s))
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
    """Runs each command in a fresh container of the kernopt-cpu image. See the module docstring."""

    name = "docker"

    def __init__(self, image: str | None = None, work_mb: int = 1024, tmp_mb: int = 256, cpus: float | None = None,
                 gpus: bool = False, client: Any = None) -> None:
        self.client = client or connect()
        self.image = image or image_tag()
        if not has_image(self.client, self.image):
            raise UserError(f"sandbox image {self.image} is not on the Docker engine: build it with `kernopt sandbox build` "
                            "(add --offline where no image registry is reachable)")
        self.work_mb, self.tmp_mb, self.gpus = work_mb, tmp_mb, gpus
        self.cpus = cpus or float(self.client.info().get("NCPU") or os.cpu_count() or 1)
        engine = self.client.api.base_url
        if engine not in _REAPED:
            reap(self.client)
            _REAPED.add(engine)

    def _create(self, name: str, workdir: Path, limits: Limits) -> tuple[Any, Any]:
        import docker

        labels = owner_labels()
        inodes = max(4096, self.work_mb * 64)
        volume = self.client.volumes.create(
            name=name, driver="local", labels=labels,
            driver_opts={"type": "tmpfs", "device": "tmpfs",
                         "o": f"size={self.work_mb}m,nr_inodes={inodes},uid={SANDBOX_UID},gid={SANDBOX_UID},mode=0700"})
        cpu_s = limits.cpu_s if limits.cpu_s is not None else math.ceil(limits.wall_s * self.cpus) + 1
        memory = (limits.memory_mb or DEFAULT_MEMORY_MB) << 20
        U = docker.types.Ulimit
        container = self.client.containers.create(
            self.image, ["sleep", str(int(limits.wall_s) + 600)], name=name, labels=labels, user=HOLDER_USER, init=True,
            working_dir=str(workdir), environment={"PATH": BASE_PATH, "LANG": "C.UTF-8"}, hostname="sandbox",
            network_mode="none", read_only=True, cap_drop=["ALL"], security_opt=["no-new-privileges"],
            pids_limit=limits.max_procs + 4,  # + init, holder, wrapper, one spare
            mem_limit=memory, memswap_limit=memory, nano_cpus=int(self.cpus * 1e9), shm_size="64m",
            ulimits=[U(name="nofile", soft=limits.max_open_files, hard=limits.max_open_files),
                     U(name="fsize", soft=limits.max_file_mb << 20, hard=limits.max_file_mb << 20),
                     U(name="cpu", soft=cpu_s, hard=cpu_s + 1), U(name="core", soft=0, hard=0)],
            tmpfs={"/tmp": f"size={self.tmp_mb}m,nr_inodes=16384,mode=1777"},
            mounts=[docker.types.Mount(str(workdir), name, type="volume")],
            log_config=docker.types.LogConfig(type="json-file", config={"max-size": "1m", "max-file": "1"}),
            device_requests=[docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])] if self.gpus else None)
        return volume, container

    def run(self, command: list[str], workdir: Path, limits: Limits, env: dict[str, str] | None = None) -> ExecResult:
        workdir = Path(workdir).resolve()
        if not workdir.is_dir():
            return _not_started(f"no directory {workdir}")
        local = _in_workdir(command[0], workdir)
        if local is not None and not (local.is_file() and os.access(local, os.X_OK)):  # before the command could remove it
            return _not_started(f"{command[0]}: no such executable in {workdir}")
        name = f"kernopt-{uuid.uuid4().hex[:16]}"
        volume = container = None
        try:
            volume, container = self._create(name, workdir, limits)
            container.start()
            container.put_archive(str(workdir), pack(workdir, SANDBOX_UID))
            child_env = {"PATH": BASE_PATH, "HOME": str(workdir), "TMPDIR": str(workdir), "LANG": "C.UTF-8", **(env or {})}
            result = self._exec(container, command, workdir, limits, child_env)
            if not result.timed_out and result.returncode is not None:
                note = self._collect(container, workdir)
                if note:
                    result.stderr += ("\n" if result.stderr else "") + note
            return result
        except _engine_errors() as e:
            # The engine went away or refused: an infrastructure failure, never the candidate's.
            return _not_started(f"docker engine: {type(e).__name__}: {str(e).strip()[:300]}")
        finally:
            self._remove(container, volume)

    def _exec(self, container: Any, command: list[str], workdir: Path, limits: Limits, env: dict[str, str]) -> ExecResult:
        import docker

        api = self.client.api
        exec_id = api.exec_create(container.id, ["sh", "-c", WRAPPER, "kernopt-run", *command], user=f"{SANDBOX_UID}:{SANDBOX_UID}",
                                  workdir=str(workdir), environment=env)["Id"]
        out, err = _Capture(limits.output_bytes), _Capture(limits.output_bytes)
        failed: list[BaseException] = []

        def pump() -> None:
            try:
                for o, e in api.exec_start(exec_id, stream=True, demux=True):
                    if o:
                        out.feed(o)
                    if e:
                        err.feed(e)
            except Exception as exc:  # reported by the caller's thread
                failed.append(exc)

        start = time.monotonic()
        reader = threading.Thread(target=pump, name=f"kernopt-{container.name}", daemon=True)
        reader.start()
        reader.join(limits.wall_s)
        wall = time.monotonic() - start
        if reader.is_alive():  # the host's wall clock: kill the whole container
            try:
                container.kill()
            except docker.errors.APIError:  # it ended on its own at that very moment
                pass
            reader.join(10)
            return ExecResult(returncode=-signal.SIGKILL, stdout=out.text(), stderr=err.text(), timed_out=True, wall_s=wall,
                              truncated=out.truncated or err.truncated)
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
            return _not_started("docker engine: the exec never reported an exit code")
        if rc == NOT_FOUND_RC and _in_workdir(command[0], workdir) is None and not self._exists(container, command[0], workdir):
            return _not_started(f"{command[0]}: not found in the sandbox image")
        if 128 < rc <= 128 + 64:  # the shell's way of saying "killed by signal rc-128"
            rc = -(rc - 128)
        return ExecResult(returncode=rc, stdout=out.text(), stderr=stderr, wall_s=wall, truncated=out.truncated or err.truncated)

    def _exists(self, container: Any, program: str, workdir: Path) -> bool:
        """Whether the image has `program` (asked after a 127: the image's files are read-only, so the
        answer cannot have been arranged by the command; a program may exit 127 by itself)."""
        r = container.exec_run(["sh", "-c", 'command -v "$1"', "exists", program], user=f"{SANDBOX_UID}:{SANDBOX_UID}",
                               workdir=str(workdir))
        return bool(r.exit_code == 0)

    def _collect(self, container: Any, workdir: Path) -> str:
        """Replace the host workdir's contents with the container's (what the local sandbox leaves)."""
        chunks, _ = container.get_archive(str(workdir))
        incoming = Path(tempfile.mkdtemp(prefix=".kernopt-incoming-", dir=workdir))
        try:
            note = extract(iter(chunks), incoming, (self.work_mb + 64) << 20)
            for entry in os.scandir(workdir):
                if entry.path == str(incoming):
                    continue
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path)
                else:
                    os.unlink(entry.path)
            for entry in os.scandir(incoming):
                os.rename(entry.path, workdir / entry.name)
        finally:
            shutil.rmtree(incoming, ignore_errors=True)
        return note

    def _remove(self, container: Any, volume: Any) -> None:
        import docker
        import requests

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
