"""`kernopt doctor`: prove, in the chosen sandbox, that every gate a verdict depends on is live.

Each check runs the real thing on a small built-in task (kernopt/doctor_task/), not a version query:
the compiler, binutils, the monitor and the seccomp-confined driver build and run the baseline; the
race check must call a known racy OpenMP kernel a race and a known clean one clean; mpicc and
mpirun must build and run a two-rank program. A failing check says what to install. `optimize`,
`eval` and `bench` run the checks their task needs once per sandbox (a pass is cached, a failure
never is) and stop with that line before the first candidate.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

from kernopt import __version__
from kernopt.candidate import Candidate
from kernopt.config import EvalConfig
from kernopt.errors import InfraError, ToolMissing, UserError
from kernopt.evaluators.base import EvalFail
from kernopt.sandbox import Sandbox
from kernopt.sandbox.tree import remove_tree
from kernopt.task import Task, load_task

GCC_FIX = "install gcc and binutils (apt-get install gcc binutils)"
MPI_FIX = "install Open MPI (apt-get install openmpi-bin libopenmpi-dev)"
_MPI_PROGRAM = """#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int sum = 0;
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("ranks %d sum %d\\n", size, sum);
    MPI_Finalize();
    return 0;
}
"""


@dataclass
class Check:
    """One gate: did it work, what was seen, and what to do when it did not."""

    name: str
    ok: bool
    detail: str
    fix: str = ""


def task_dir() -> Path:
    return Path(str(resources.files("kernopt") / "doctor_task"))


def _task() -> Task:
    task = load_task(task_dir())
    assert isinstance(task, Task)
    return task


def check_build(sandbox: Sandbox, config: EvalConfig) -> Check:
    """gcc, binutils, the monitor and the confined driver: the baseline builds, passes the object gate and runs."""
    from kernopt.evaluators.base import Binary
    from kernopt.evaluators.c_family.evaluator import CFamilyEvaluator

    with tempfile.TemporaryDirectory(prefix="kernopt-doctor-") as d:
        try:
            task = _task()
            ev = CFamilyEvaluator(task, sandbox, config, Path(d))
            with ev.session():
                prog = ev.baseline_binary()
                run, rd, r = ev.run_driver(Binary(prog, 2, 1, None), [1000], [12345], False, 60.0)
                remove_tree(rd)
        except (ToolMissing, InfraError) as e:
            return Check("build", False, str(e), GCC_FIX)
        if not run.complete:
            return Check("build", False, f"the monitor did not finish a run: {run.error or r.stderr.strip()[-200:]}", GCC_FIX)
        return Check("build", True, "gcc, binutils, the monitor and the confined driver build and run the baseline")


def check_race(sandbox: Sandbox, config: EvalConfig) -> Check:
    """The race check calls a known race a race and a known clean kernel clean: the static check and the
    sanitizer each on its own (the sanitizer's runs behind the system-call filter, its report read back)."""
    from kernopt.evaluators.c_family import race
    from kernopt.evaluators.c_family.evaluator import CFamilyEvaluator

    got: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="kernopt-doctor-") as d:
        try:
            task = _task()
            ev = CFamilyEvaluator(task, sandbox, config, Path(d))
            with ev.session():
                for name in ("racy", "clean"):
                    cand = Candidate(files={task.kernel: (task_dir() / f"{name}.c").read_text()})
                    prog, _ = ev.build(cand)
                    nm = (prog.parent / "nm.txt").read_text(errors="replace")
                    remove_tree(prog.parent)
                    source = race.preprocess(ev, cand)
                    verdict, detail = race.dynamic(ev, cand, source)
                    if verdict == "unavailable":
                        return Check("race", False, f"the race check cannot run: {detail.splitlines()[0] if detail else ''}",
                                     race.FIX["tsan"])
                    got[name] = verdict
                    got[f"static {name}"] = race.static_verdict(source, nm).verdict
        except (ToolMissing, InfraError, EvalFail, race.Unavailable) as e:
            return Check("race", False, str(getattr(e, "reason", e)), race.FIX["clang"])
    want = {"racy": "race", "clean": "clean", "static racy": "race", "static clean": "proven"}
    if got != want:
        return Check("race", False, "known race / known clean kernel: " + ", ".join(f"{k} {got[k]}" for k in want)
                     + " (expected " + ", ".join(f"{k} {v}" for k, v in want.items()) + ")", race.FIX["tsan"])
    return Check("race", True, "ThreadSanitizer (behind the system-call filter) and the static check each report the known "
                               "race and pass the known clean kernel")


def check_mpi(sandbox: Sandbox, config: EvalConfig) -> Check:
    """mpicc builds and mpirun runs a two-rank program in the sandbox."""
    from kernopt.evaluators.base import SandboxedEvaluator
    from kernopt.sandbox.local import BASE_PATH

    class _Steps(SandboxedEvaluator):
        def __init__(self, workroot: Path) -> None:
            self.sandbox = self._sb = sandbox
            self.workroot, self.config = workroot, config

    if sandbox.name == "local" and (shutil.which("mpicc") is None or shutil.which("mpirun") is None):
        return Check("mpi", False, "mpicc or mpirun not found on PATH", MPI_FIX)
    with tempfile.TemporaryDirectory(prefix="kernopt-doctor-") as d:
        os.chmod(d, 0o755)  # the sandbox user enters it
        steps = _Steps(Path(d))
        w = steps.new_dir("mpi")
        (w / "hello.c").write_text(_MPI_PROGRAM)
        env = {"PATH": BASE_PATH, "OMPI_MCA_rmaps_base_oversubscribe": "1"}
        try:
            r = steps.run_step(["sh", "-c", "mpicc hello.c -o hello && mpirun --oversubscribe -np 2 ./hello"], w, 120.0, env)
        except InfraError as e:
            return Check("mpi", False, str(e), MPI_FIX)
    if not r.ok or "ranks 2 sum 1" not in r.stdout:
        return Check("mpi", False, f"a two-rank program did not run: {(r.stderr or r.stdout).strip()[-200:]}", MPI_FIX)
    return Check("mpi", True, "mpicc builds and mpirun runs a two-rank program")


CHECKS = {"build": check_build, "race": check_race, "mpi": check_mpi}


def run(sandbox: Sandbox, names: list[str] | None = None, fresh: bool = False, config: EvalConfig | None = None) -> list[Check]:
    """Run the named checks (all by default) in this sandbox with the evaluator settings `config`; passes
    are cached (`fresh`: run them anyway)."""
    config = config or EvalConfig()
    out = []
    for name in names or list(CHECKS):
        cached = None if fresh else _cached(sandbox, name, config)
        check = cached if cached is not None else CHECKS[name](sandbox, config)
        if check.ok and cached is None:
            _save(sandbox, check, config)
        out.append(check)
    return out


def needed(task: object, race_check: bool) -> list[str]:
    """The checks a C-family task's evaluation relies on (none for the torch family, whose runner is Python)."""
    if not isinstance(task, Task) or task.uses_gpu:
        return []
    names = ["build"]
    if task.uses_openmp and race_check and task.verify.race_check and not task.uses_mpi:
        names.append("race")
    if task.uses_mpi:
        names.append("mpi")
    return names


def preflight(sandbox: Sandbox, task: object, config: EvalConfig) -> None:
    """Before the first candidate: every gate this task needs is live, or one line says what to install."""
    for check in run(sandbox, needed(task, config.race_check), config=config):
        if not check.ok:
            more = "; or pass --no-race-check to evaluate without it (every result then says so)" if check.name == "race" else ""
            raise UserError(f"{check.name} gate is not live in the {sandbox.name} sandbox: {check.detail}; fix: {check.fix}{more} "
                            "(kernopt doctor shows every gate)")


def _cache_file(sandbox: Sandbox, name: str, config: EvalConfig) -> Path:
    from kernopt.hw.probe import fingerprint

    fp = fingerprint(sandbox)
    parts = (sandbox.name, fp.compiler, fp.kernel, __version__, config.race_compiler)
    key = "-".join(x for x in parts if x).replace("/", "_").replace(" ", "_")
    return Path.home() / ".cache" / "kernopt" / "doctor" / f"{key}-{name}.json"


def _cached(sandbox: Sandbox, name: str, config: EvalConfig) -> Check | None:
    try:
        data = json.loads(_cache_file(sandbox, name, config).read_text())
        return Check(**data) if data.get("ok") and data.get("name") == name else None
    except (OSError, ValueError, TypeError):
        return None


def _save(sandbox: Sandbox, check: Check, config: EvalConfig) -> None:
    path = _cache_file(sandbox, check.name, config)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(check)))
    except OSError:
        pass  # an unwritable cache only means checking again next time
