"""What every evaluator shares: the verdict exception, the sandboxed-step machinery, output excerpts,
and the linked C-family program. The families build on these (c_family/, torch_family/); nothing here
knows a target."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from kernopt import placement
from kernopt.candidate import Candidate
from kernopt.config import EvalConfig
from kernopt.errors import InfraError
from kernopt.evaluators.result import TimingStats, VerifiedBest
from kernopt.sandbox import ExecResult, Limits, Sandbox


class EvalFail(Exception):
    """Ends an evaluation early with a verdict (a status, one line of reason, a log excerpt)."""

    def __init__(self, status: str, reason: str, log: str = "") -> None:
        super().__init__(reason)
        self.status, self.reason, self.log = status, reason, log


def new_seed() -> int:
    """A fresh seed nobody can predict (62 bits: every harness and the runner take it as a signed 64-bit)."""
    return secrets.randbits(62)


def tail(text: str, lines: int = 25) -> str:
    """The last `lines` lines of a command's output."""
    return "\n".join(text.strip().splitlines()[-lines:])


# The one-line messages of kernopt's own driver and monitor, in plain characters: the only part of a candidate
# process's output a log keeps (program_messages).
_PROGRAM_MESSAGE = re.compile(r"^kernopt (?:driver|monitor): [\w ,.:;()'/=+-]{1,200}$")


def program_messages(output: str, limit: int = 5) -> str:
    """What a log keeps of the output of a process that ran candidate code: kernopt's driver's and monitor's
    one-line messages of a fixed shape (the last `limit`), and how many bytes of the rest were not copied.
    Never the rest: every byte such a process writes is the candidate's to forge, and it could carry
    anything the process could read."""
    kept = [ln for ln in output.splitlines() if _PROGRAM_MESSAGE.match(ln)][-limit:]
    other = len(output.encode(errors="replace")) - sum(len(ln) + 1 for ln in kept)
    note = f"(the program's own output, {other} bytes, is not shown: a candidate's output is never copied)" if other > 0 else ""
    return "\n".join([*kept, note] if note else kept)


def describe_exit(r: ExecResult) -> str:
    """How a sandboxed command ended: 'exited with code 3', 'killed by SIGKILL'."""
    if r.returncode is not None and r.returncode < 0:
        try:
            return f"killed by {signal.Signals(-r.returncode).name}"
        except ValueError:
            return f"killed by signal {-r.returncode}"
    return f"exited with code {r.returncode}"


def first_error(stderr: str, fallback: str = "") -> str:
    """The compiler's first line that reports an error (its notes and source excerpts may be many)."""
    return next((ln.strip() for ln in stderr.splitlines() if "error" in ln), fallback)


# Progress of one evaluation, for display: "building", "verifying at n=1,7,33 on 2 threads", "timing round 2/5".
# The core never prints: the CLI sets the evaluator's `on_phase` to its display's hook.
PhaseFn = Callable[[str], None]


class SandboxedEvaluator:
    """What every evaluator shares: `self._sb` is the sandbox its steps run in (the evaluation's session,
    docker: one container, inside `session()`; the evaluator's sandbox outside it), each step in a fresh
    directory under `workroot`."""

    sandbox: Sandbox
    workroot: Path
    config: EvalConfig
    _sb: Sandbox
    start_hint = ""  # appended to "sandbox could not start ..." (what the user can do about it)
    on_phase: PhaseFn | None = None  # told each phase of an evaluation as it starts (display only)

    def how_built(self, candidate: Candidate) -> str | None:
        """What best/BUILD says about building and running the candidate; None where nothing is built."""
        return None

    def phase(self, text: str) -> None:
        """Report the phase now starting; a display failure never fails an evaluation."""
        if self.on_phase is not None:
            with contextlib.suppress(Exception):
                self.on_phase(text)

    def timing_flags(self, timing: TimingStats, best: VerifiedBest | None = None) -> list[str]:
        """Review flags of a timed result, the evaluation's and the re-measurement's alike (the summary reports
        the re-measurement's: a 485x cuda-c speedup on the H100 once came without its implausible_speedup flag).
        A speedup above plausible_max_speedup is implausible unless it is within PLAUSIBLE_JUMP of the search's
        verified best (`best`): after a verified 17x, an 18x is no surprise; the recheck is for jumps."""
        implausible = timing.speedup > self.config.plausible_max_speedup and not (best is not None and best.plausible(timing.speedup))
        flags = ["implausible_speedup"] if implausible else []
        return flags + ([] if timing.consistent else ["timing_inconsistent"]) + (["machine_busy"] if timing.machine_busy else [])

    @contextlib.contextmanager
    def session(self) -> Iterator[None]:
        """One sandbox session (docker: one container) for everything one evaluation runs. Its end (docker:
        removing the container and its volume, about a CPU-second of the engine's) holds the host lock shared,
        like a build: done outside it, it ran during another evaluation's timing (seen as 1.3 CPUs of other
        processes in the baseline's calls, stats.disturbed)."""
        session = self.sandbox.session(self.workroot)
        self._sb = session.__enter__()
        try:
            yield
        finally:
            self._sb = self.sandbox
            with placement.hold("shared", what="removing an evaluation's sandbox", on_wait=self.on_phase):
                session.__exit__(None, None, None)

    def tool_dirs(self) -> list[str]:
        """Directories searched first for tools in local-sandbox steps (see tool_env)."""
        return []

    def tool_env(self) -> dict[str, str]:
        """What a local-sandbox step needs to find this machine's tools; nothing for other sandboxes (an
        image has its own). The evaluator looks tools up on this process's PATH (nvcc, gcc, ninja beside
        a venv's Python), so its steps search the same directories: a toolkit under /usr/local/cuda/bin
        or a driver found only through LD_LIBRARY_PATH would otherwise be missing in the sandbox alone."""
        if self.sandbox.name != "local":
            return {}
        from kernopt.sandbox.local import BASE_PATH

        dirs = [*self.tool_dirs(), *os.environ.get("PATH", "").split(os.pathsep), *BASE_PATH.split(os.pathsep)]
        env = {"PATH": os.pathsep.join(dict.fromkeys(d for d in dirs if os.path.isabs(d)))}
        libs = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if os.path.isabs(d)]
        if libs:
            env["LD_LIBRARY_PATH"] = os.pathsep.join(dict.fromkeys(libs))
        return env

    def run_step(self, cmd: list[str], cwd: Path, timeout: float, env: dict[str, str] | None = None,
             memory_mb: int | None = -1) -> ExecResult:
        """One sandboxed step under the config's limits (memory_mb -1: the config's; None: no limit)."""
        limits = Limits(wall_s=timeout, memory_mb=self.config.memory_mb if memory_mb == -1 else memory_mb)
        r = self._sb.run(cmd, cwd, limits, {**self.tool_env(), **(env or {})})
        if r.returncode is None and not r.timed_out:
            raise InfraError(f"sandbox could not start {cmd[0]}: {r.stderr.strip()[:200]}{self.start_hint}")
        return r

    def new_dir(self, label: str) -> Path:
        d = self.workroot / f"{label}-{uuid.uuid4().hex[:8]}"
        d.mkdir(parents=True)
        os.chmod(d, 0o755)
        return d


# Full RELRO for every linked C-family program (the measured one and the race check's): its GOT is read-only
# before main(), so a kernel cannot re-point the calls of kernopt's driver.
RELRO = ["-Wl,-z,relro,-z,now"]


@dataclass
class Binary:
    """A linked driver+harness+kernel program, in a directory the sandbox cannot write, and how to run it."""

    path: Path
    threads: int
    ranks: int
    bind: str | None
