"""The Sandbox protocol: run one command over a private work directory, under limits."""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field


class Limits(BaseModel):
    """Resource limits for one sandboxed command. Enforced by the sandbox, never by the candidate."""

    model_config = ConfigDict(extra="forbid")

    wall_s: float = Field(60.0, gt=0, description="Hard wall clock; the whole process tree is killed after it.")
    cpu_s: int | None = Field(None, description="CPU seconds (RLIMIT_CPU); None = wall_s * cores + slack.")
    memory_mb: int | None = Field(4096, description="Address-space limit in MiB; None disables (ThreadSanitizer needs that).")
    max_procs: int = Field(256, ge=1, description="Processes/threads the sandbox user may own (fork/thread bombs).")
    max_file_mb: int = Field(512, ge=1, description="Largest file the command may write (RLIMIT_FSIZE).")
    max_open_files: int = Field(1024, ge=16, description="File descriptors (RLIMIT_NOFILE).")
    output_bytes: int = Field(64 * 1024, ge=1024, description="stdout/stderr kept each: head and tail halves.")
    # The work directory, bounded so that no step can fill the host's disk or leave a tree that
    # kernopt's own clean-up cannot walk (docker: its volume, sized by DockerSandbox's work_mb).
    work_mb: int = Field(1024, ge=16, description="Local sandbox as root: size of the step's work directory, a tmpfs, in MiB.")
    max_entries: int = Field(65536, ge=64, description="Files and directories the work directory may hold (the tmpfs's "
                                                       "inodes; otherwise checked after the step).")
    max_depth: int = Field(64, ge=4, description="How deep directories may nest in the work directory; a deeper tree "
                                                 "is not kept.")
    tmp_mb: int = Field(64, ge=1, description="Local sandbox: size of each private tmpfs at /tmp, /var/tmp and /dev/shm, in MiB.")


class ExecResult(BaseModel):
    """What happened to one sandboxed command."""

    model_config = ConfigDict(extra="forbid")

    returncode: int | None = Field(description="Exit code; negative = killed by that signal; None if never started.")
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    wall_s: float = 0.0
    truncated: bool = Field(False, description="True when stdout or stderr exceeded the capture limit.")

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


class Sandbox(Protocol):
    """Runs commands in isolation.

    `workdir` is a directory the orchestrator created and owns; the command sees it as its current
    directory and may write only there. `env` holds the only variables the command sees beyond a
    minimal PATH/HOME/LANG: the host environment is never inherited.
    """

    name: str
    cpus: float  # cores the commands can use (the engine's, for a remote docker engine)

    def run(self, command: list[str], workdir: Path, limits: Limits, env: dict[str, str] | None = None) -> ExecResult:
        ...

    def session(self, root: Path) -> AbstractContextManager[Sandbox]:
        """A sandbox for the steps of one evaluation, whose work directories are `root`'s children.
        Each step stays as isolated from the others as a `run()` of its own; a sandbox may share set-up
        cost between them (docker: one container per evaluation)."""
        ...
