"""The C-family evaluator (openmp, mpi, mpi+openmp, serial c/c++): static gate, build, verify, time.

Every program runs in the sandbox under kernopt's monitor (c/monitor.c), a process of its own that
hands the measured program one call at a time, keeps the clock, stops the program between calls and
copies its outputs out of its memory (docs/verification.md, "Trust boundary"). This module decides
what to run and judges the monitor's report. Baseline and candidate share the trusted objects
(driver.o, harness.o, the monitor) and the task's flags; the baseline runs out of a directory the
sandbox cannot write.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shlex
import shutil
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from kernopt import placement
from kernopt.candidate import Candidate
from kernopt.config import EvalConfig
from kernopt.errors import InfraError, TaskBuildError, ToolMissing
from kernopt.evaluators import stats
from kernopt.evaluators.base import (
    RELRO,
    Binary,
    EvalFail,
    SandboxedEvaluator,
    describe_exit,
    first_error,
    program_messages,
    tail,
)
from kernopt.evaluators.c_family import optinfo, race
from kernopt.evaluators.c_family.compare import Call, DriverRun, ReportError, compare, load_outputs, read_report
from kernopt.evaluators.c_family.static_gate import check_object, check_source, own_split_calls
from kernopt.evaluators.result import EvalResult, PairedComparison, Roofline, TimingStats, Verification, VerifiedBest
from kernopt.sandbox import ExecResult, Sandbox
from kernopt.sandbox.tree import remove_tree
from kernopt.task import Task

if TYPE_CHECKING:
    from kernopt.hw.probe import HardwareProfile

_CC_FAILED, _INSPECT_FAILED = 97, 98  # the build step's exit codes for "the compiler failed", "binutils failed"
_LINK_MARK = "kernopt-build: linking"
_OWN_SYMBOLS = "nm.own.txt"  # a chosen toolchain's build: the symbols of the kernel compiled without its parallel loops
# The measured program's own files: the driver's headers and the monitor, compiled apart from it.
TRUSTED_SOURCES = ("driver.c", "kernopt.h", "protocol.h", "seccomp.h", "monitor.c")
# How a rejecting race verdict reads ({} is the detail's first line; a forged report's says so itself).
_RACE_REASON = {"race": "data race: {}", "unavailable": "race check unavailable: {}; or opt out with --no-race-check",
                "forged": "{}", "unproven": "race check: {}"}


@dataclass(frozen=True)
class Toolchain:
    """Another compiler and extra flags for a candidate's kernel object: trusted benchmark use only
    (bench/peers.py builds the baseline source with compilers' own optimizers, e.g. gcc's
    -ftree-parallelize-loops or clang's Polly). The flags bypass the candidate flag gate, so nothing
    a policy or a run config says reaches it: only CFamilyEvaluator.check_untimed takes one."""

    compiler: str
    cflags: tuple[str, ...] = ()
    ldflags: tuple[str, ...] = ()  # added to the link (e.g. -lgomp for auto-parallelized code in a serial task)


POLLY_FLAGS = ("-mllvm", "-polly", "-mllvm", "-polly-parallel")


# clang 14's Polly (Debian 12's default clang) segfaults in its ADCE pass on some chains of matrix products; Debian
# 12's clang-19 has Polly built in (no plugin to load) and compiles them. The race check keeps its own clang (race.py).
POLLY_CLANG = "clang-19"


def polly_toolchain(language: str) -> Toolchain:
    """clang-19 -O3 -march=native with Polly and its OpenMP parallel loops (libgomp at link): bench/peers.py's
    "clang Polly" peer, and a candidate's `toolchain = "polly"` build."""
    return Toolchain(POLLY_CLANG.replace("clang", "clang++") if language == "cpp" else POLLY_CLANG,
                     ("-march=native", *POLLY_FLAGS), ("-lgomp",))


def driver_sources() -> Path:
    return Path(str(resources.files("kernopt.evaluators.c_family") / "c"))


class CFamilyEvaluator(SandboxedEvaluator):
    """Verifies and times C-family candidates of one task in one sandbox."""

    # How the build step inspects kernel.o for the object gate (cuda_c.py reads relocations too).
    inspect_commands = "nm -P kernel.o > nm.txt && readelf -SW kernel.o > sections.txt && objdump -d kernel.o > disassembly.txt"
    link_flags: list[str] = RELRO

    def __init__(self, task: Task, sandbox: Sandbox, config: EvalConfig, workroot: Path,
                 profile: HardwareProfile | None = None) -> None:
        self.task, self.sandbox, self.config = task, sandbox, config
        # The machine's roofs for roofline figures: given, or read from the cache when first needed
        # (an evaluation never probes: `kernopt optimize`/`eval` measure first when nothing is cached).
        self._profile, self._profile_read = profile, profile is not None
        self.workroot = workroot
        # The local sandbox runs this machine's tools; a container has the image's (a missing one is
        # "not found in the sandbox image", an infrastructure error), and may be on another machine.
        for tool in ([task.compiler, "nm", "readelf", "objdump"] + (["mpirun"] if task.uses_mpi else [])) * (sandbox.name == "local"):
            if shutil.which(tool) is None:
                raise ToolMissing(f"{tool} not found on PATH: install it (see README, 'Set-up') to evaluate {task.target} tasks")
        self.workroot.mkdir(parents=True, exist_ok=True)
        os.chmod(self.workroot, 0o755)
        self._trusted: Path | None = None
        self._baseline: Path | None = None
        self._best: tuple[str, Path] | None = None  # the search's best: (its id, its binary), kept until the best changes
        self._sb: Sandbox = sandbox  # within evaluate(): the evaluation's session
        self._reports: dict[str, str] = {}  # candidate id -> its compiler report (optinfo.py), from its latest build

    def tool_dirs(self) -> list[str]:
        """The race check's clang, when configured by absolute path (eval.race_compiler = /opt/llvm/bin/clang):
        the local sandbox shows a step only the directories it is told of."""
        rc = self.config.race_compiler
        return [os.path.dirname(rc)] if os.path.isabs(rc) else []

    # ---------------------------------------------------------------- building
    def _base_flags(self) -> list[str]:
        return [*self.task.build.cflags, *(["-fopenmp"] if self.task.uses_openmp else [])]

    def chosen_toolchain(self, candidate: Candidate) -> Toolchain | None:
        """The toolchain a candidate asks for (`toolchain = "polly"`), None for the task's compiler."""
        return polly_toolchain(self.task.language) if candidate.toolchain == "polly" else None

    def kernel_command(self, candidate: Candidate, toolchain: Toolchain | None = None) -> list[str]:
        """The compile of the candidate's kernel object (run in a directory holding the kernel file)."""
        tc = toolchain or Toolchain(self.task.compiler)
        return [tc.compiler, *self._base_flags(), *tc.cflags, *candidate.cflags, *candidate.define_flags, "-c",
                Path(self.task.kernel).name, "-o", "kernel.o"]

    def link_command(self, toolchain: Toolchain | None = None) -> list[str]:
        """The link of the trusted driver and harness objects with the kernel object into `prog`."""
        tc = toolchain or Toolchain(self.task.compiler)
        return [self.task.compiler, *self._base_flags(), "driver.o", "harness.o", "kernel.o", *self.task.build.ldflags,
                *tc.ldflags, *self.link_flags, "-o", "prog"]

    def how_built(self, candidate: Candidate) -> str:
        """best/BUILD: the kernel object's compile and the link as the evaluation ran them, and the environment
        and command the timed program ran with (its driver and harness are kernopt's)."""
        tc = self.chosen_toolchain(candidate)
        command, env = self._launch(self._binary(Path("prog"), candidate))
        lines = [f"# {self.task.name}: how kernopt compiled this kernel and ran the timed program", shlex.join(self.kernel_command(candidate, tc)),
                 f"# linked with kernopt's driver and the task's harness: {shlex.join(self.link_command(tc))}",
                 f"# ran as: {' '.join(f'{k}={shlex.quote(v)}' for k, v in env.items())} {shlex.join(command)}"]
        return "\n".join(lines) + "\n"

    def stage_trusted_sources(self, d: Path) -> str:
        """Copy the driver's and the monitor's sources and the task's harness into d; returns the harness
        file name."""
        src = driver_sources()
        for name in TRUSTED_SOURCES:
            shutil.copy(src / name, d / name)
        harness = Path(self.task.harness).name
        shutil.copy(self.task.root / self.task.harness, d / harness)
        return harness

    def _trusted_objects(self) -> Path:
        """driver.o and harness.o, compiled once per evaluator with the task's flags, and the monitor."""
        if self._trusted is None:
            d = self.new_dir("trusted")
            harness = self.stage_trusted_sources(d)
            defines = ["-DKO_MPI"] * self.task.uses_mpi + ["-DKO_CUDA"] * self.task.uses_gpu
            for out, name, extra in (("driver.o", "driver.c", defines), ("harness.o", harness, [])):
                r = self.run_step([self.task.compiler, *self._base_flags(), *extra, "-I.", "-c", name, "-o", out],
                              d, self.config.build_timeout_s)
                if not r.ok:  # the compiler's first error line first (its notes and source lines may be many)
                    first = first_error(r.stderr)
                    raise TaskBuildError(f"task harness does not build ({name}): {first[:300]}"
                                     + (f"\n{tail(r.stderr, 5)}" if first else tail(r.stderr, 5)))
            r = self.run_step(["gcc", "-O2", "-I.", "monitor.c", "-o", "monitor"], d, self.config.build_timeout_s)
            if not r.ok:
                raise InfraError(f"kernopt's monitor does not build: {tail(r.stderr, 5)}")
            out_dir = self.new_dir("trusted-obj")
            for name in ("driver.o", "harness.o", "monitor"):
                shutil.copy(d / name, out_dir / name)
            remove_tree(d)
            self._trusted = out_dir
        return self._trusted

    def build(self, candidate: Candidate) -> tuple[Path, str]:
        """Compile, inspect and link the candidate in one sandboxed step; returns (binary in a read-only
        dir, build log). Raises EvalFail. Only the compiler and binutils run here, never the candidate's code,
        so one step is as safe as three (and a container step costs ~0.1 s). A candidate with `toolchain =
        "polly"` is compiled by polly_toolchain(): see build_with's `chosen`."""
        tc = self.chosen_toolchain(candidate)
        return self.build_with(candidate, tc, chosen=tc is not None)

    def build_with(self, candidate: Candidate, toolchain: Toolchain | None, chosen: bool = False) -> tuple[Path, str]:
        """build(), with the kernel object compiled by `toolchain` (see Toolchain) when one is given;
        the trusted objects, the object gate and the link are the same.

        `chosen`: the toolchain is one the candidate asked for (its source is not trusted). Polly's parallel loops
        call OpenMP's split region start/end, which the object gate refuses in a candidate's object (a team left
        running after the kernel returns). They pass here only when the same compile without Polly (first,
        in the same step and directory; the kernel cannot test which files exist, static_gate forbids
        __has_include) references none of them, so every such call in the object is one Polly emitted: a name
        assembled in any way the text gate cannot read still shows in that object's symbols."""
        trusted = self._trusted_objects()
        d = self.new_dir("build")
        kernel_name = Path(self.task.kernel).name
        (d / kernel_name).write_text(candidate.files[self.task.kernel])
        for name in ("driver.o", "harness.o"):
            shutil.copy(trusted / name, d / name)
        try:
            tc = toolchain or Toolchain(self.task.compiler)
            cc = self.kernel_command(candidate, tc)
            link = self.link_command(tc)
            own = ""
            if chosen:  # the same compile without Polly, its symbols kept (see above); it takes ~0.1 s, not Polly's ~23 s
                serial = [f for k, f in enumerate(cc)
                          if not f.startswith("-polly") and not (f == "-mllvm" and cc[k + 1].startswith("-polly"))]
                own = f"{shlex.join(serial)} || exit {_CC_FAILED}; nm -P kernel.o > {_OWN_SYMBOLS} || exit {_INSPECT_FAILED}; rm kernel.o; "
            script = (f"{own}{shlex.join(cc)} || exit {_CC_FAILED}; "
                      f"{self.inspect_commands} || exit {_INSPECT_FAILED}; echo '{_LINK_MARK}' >&2; {shlex.join(link)}")
            # Polly's matrix-product optimization alone takes ~23 s of clang for a small gemm on a 2-core machine: a
            # Polly build gets three times the wall clock of one compile.
            timeout = self.config.build_timeout_s * (3 if toolchain is not None and "-polly" in tc.cflags else 1)
            r = self.run_step(["sh", "-c", script], d, timeout)
            compile_err, *rest = re.split(f"(?m)^{_LINK_MARK}\n", r.stderr, maxsplit=1)  # a line of its own: no diagnostic is
            linked, link_err = bool(rest), "".join(rest)
            log = f"$ {shlex.join(cc)}\n{r.stdout}{compile_err}" + (f"\n$ {shlex.join(link)}\n{link_err}" if linked else "")
            if r.timed_out:
                raise EvalFail("compile_error", f"compilation timed out after {timeout:.0f}s", log)
            inspected = [d / f for f in ("nm.txt", "sections.txt", "disassembly.txt")]
            if r.returncode == _INSPECT_FAILED and not linked:
                raise EvalFail("rejected", f"the compiled kernel could not be inspected: {tail(compile_err, 1)[:300]}")
            if not linked or not all(f.is_file() for f in inspected):
                first = first_error(compile_err, tail(compile_err, 1).strip() or describe_exit(r))
                raise EvalFail("compile_error", f"{kernel_name} does not compile: {first[:300]}", tail(compile_err))
            nm, sections, disassembly = (f.read_text(errors="replace") for f in inspected)
            if chosen:
                calls = own_split_calls((d / _OWN_SYMBOLS).read_text(errors="replace")[:2_000_000])
                if calls:
                    raise EvalFail("rejected", f"the kernel calls OpenMP's split region itself ({calls[0]}): only the "
                                               f"compiler's own parallel loops may, in a {candidate.toolchain} build")
            why = check_object(self.task, nm, sections, disassembly, trusted_build=toolchain is not None)
            if why:
                raise EvalFail("rejected", why)
            if not r.ok:
                raise EvalFail("compile_error", f"link failed: {tail(link_err, 1)[:300]}", tail(link_err))
            bin_dir = self.new_dir("bin")
            shutil.copy(d / "prog", bin_dir / "prog")
            shutil.copy(d / "nm.txt", bin_dir / "nm.txt")  # the race check reads the object's OpenMP calls
            if toolchain is None and not self.task.uses_gpu:
                # The compiler report (optinfo.py): advice for the LLM roles (EvalResult.compiler_report), never part
                # of a verdict, from a second compile into an object nobody links, in a step of its own after the
                # build (its own time limit; a failure or a timeout only means no report).
                with contextlib.suppress(InfraError):
                    self.run_step(["sh", "-c", optinfo.report_command(cc)], d, min(optinfo.TIMEOUT_S, self.config.build_timeout_s))
                found = [(d / f).read_text(errors="replace")[:200_000] if (d / f).is_file() else ""
                         for f in (optinfo.OPTINFO_FILE, optinfo.STACK_FILE)]
                text = optinfo.summarize(found[0], found[1], candidate.files[self.task.kernel], kernel_name)
                if text:
                    self._reports[candidate.id] = text
            os.chmod(bin_dir / "prog", 0o755)
            return bin_dir / "prog", log
        finally:
            if not self.config.keep_workdirs:
                remove_tree(d)

    def baseline_binary(self) -> Path:
        if self._baseline is None:
            base = Candidate(files={self.task.kernel: self.task.baseline_source()}, author="baseline")
            try:
                self._baseline, _ = self.build(base)
            except EvalFail as f:
                raise TaskBuildError(f"task baseline fails to build: {f.reason}") from None
        return self._baseline

    # ---------------------------------------------------------------- running
    def _launch(self, b: Binary) -> tuple[list[str], dict[str, str]]:
        """The command that starts the measured program (under mpirun for MPI tasks) and its environment;
        the program takes no arguments: the monitor hands it everything through its pipes."""
        # GOMP_SPINCOUNT: idle workers spin ~50 us (gcc's default, 300000 spins, is ~1.5 ms of CPU per
        # call and worker), so the CPU a kernel uses outside the timed calls can be held to a tight bound.
        env = {"OMP_NUM_THREADS": str(b.threads), "OMP_PLACES": "cores", "GOMP_SPINCOUNT": "10000",
               "OMP_PROC_BIND": "false" if b.bind == "none" else (b.bind or "close")}
        if not self.task.uses_mpi:
            return ["./prog"], env
        cores = int(self.sandbox.cpus)  # the machine the commands run on
        fits = b.ranks * (b.threads if self.task.uses_openmp else 1) <= cores  # OMP_NUM_THREADS means nothing to pure MPI
        # Binding is a candidate's knob (`bind core`); by default the OS places the ranks, which is how
        # every MPI figure in docs/results.md was measured. Oversubscribed runs cannot bind at all.
        bind = "core" if b.bind == "core" and fits else "none"
        env["OMPI_MCA_rmaps_base_oversubscribe"] = "1"
        return ["mpirun", "--oversubscribe", "-np", str(b.ranks), "--bind-to", bind, "./prog"], env

    def run_driver(self, b: Binary, sizes: list[int], seeds: list[int], timing: bool, timeout: float,
                   warmup: int = 0, reps: int = 0, extra_env: dict[str, str] | None = None,
                   memory_mb: int | None = -1, report: str | None = None) -> tuple[DriverRun, Path, ExecResult]:
        """Run the program under the monitor once, in a fresh directory; returns the parsed report, the
        directory (the outputs lie there as o_<call>.bin) and the exec result.

        The plan says which calls to make: every seed at every size, or (timing) `warmup` calls whose
        outputs are not kept and then `reps` kept ones at the one size, call i with seeds[i] (the
        caller passes fresh seeds: reused seeds let a kernel replay cached answers). `report`: a file the
        monitor creates in the directory for the sanitizer's reports (the race check's runs)."""
        d = self.new_dir("run")
        # Everything the command needs is in its own directory, named relative to it: a sandbox may
        # run it on another filesystem (a container's), and no run needs another run's files.
        for src, name in ((b.path, "prog"), (self._trusted_objects() / "monitor", "monitor")):
            shutil.copy(src, d / name)
            os.chmod(d / name, 0o755)
        nonce = secrets.token_hex(8)
        # MPI and CUDA programs finish a call after "done" (input checks on every rank, device downloads)
        lines = [f"kernopt-plan {nonce} {int(self.task.uses_mpi or self.task.uses_gpu)}"]
        for n in sizes:
            lines.append(f"size {n}")
            if timing:
                lines += [f"call {seeds[i % len(seeds)]} {int(i >= warmup)}" for i in range(warmup + reps)]
            else:
                lines += [f"call {seed} 1" for seed in seeds]
        # The monitor reads the plan and deletes it before the measured program starts.
        (d / "plan").write_text("\n".join(lines) + "\n")
        cmd, env = self._launch(b)
        if memory_mb == -1 and self.task.limits.memory_mb:  # the task asks for more than the default cap
            memory_mb = max(self.config.memory_mb, self.task.limits.memory_mb)
        try:
            monitor = ["./monitor", "plan", *(["--report", report] if report else []), "--"]
            r = self.run_step([*monitor, *cmd], d, timeout, {**env, **(extra_env or {})}, memory_mb=memory_mb)
        finally:
            os.chmod(d, 0o700)  # its outputs stay out of reach of every later sandboxed run
        return read_report(r.stdout, nonce), d, r

    def _check_run(self, run: DriverRun, r: ExecResult, where: str, timeout: float) -> None:
        if r.timed_out:
            hint = " (deadlock?)" if self.task.uses_mpi else ""
            raise EvalFail("timeout", f"timed out after {timeout:.0f}s at {where}{hint}", program_messages(r.stderr))
        for call in run.calls:
            # the monitor names every input that changed (comma-separated); only the task's scratch inputs may
            changed = [m for m in (call.mutated or "").split(",") if m and m not in self.task.verify.scratch]
            if changed and not self.task.verify.allow_input_mutation:
                raise EvalFail("rejected", f"kernel modified its input {changed[0]!r} (n={call.n}, {where})")
        if not r.ok or not run.complete:
            why = run.error or (describe_exit(r) if not r.ok else "exited before the harness finished")
            if "SIGSYS" in why or (self.task.uses_mpi and "exited with code 159" in why):  # mpirun: 128 + SIGSYS
                why += ": a system call the measured program may not make (see docs/verification.md)"
            raise EvalFail("runtime_error", f"{why} at {where} after {len(run.calls)} calls", program_messages(r.stderr))

    def _compare_dirs(self, run: DriverRun, d: Path, ref: DriverRun, ref_dir: Path, where: str,
                      ver: Verification) -> None:
        """Compare every recorded call of `run` with the reference output for its (size, seed)."""
        want: dict[tuple[int, int], Call] = {}
        for c in ref.calls:
            if c.file:
                want.setdefault((c.n, c.seed), c)
        covered = {(c.n, c.seed) for c in run.calls if c.file}
        missing = sorted(set(want) - covered)
        if missing:
            raise EvalFail("runtime_error", f"no output recorded for n={missing[0][0]} at {where}")
        for n, layout in run.layouts.items():
            if ref.layouts.get(n, layout) != layout:
                raise EvalFail("runtime_error", f"the buffer table at n={n} differs from the baseline's at {where}")
        for call in run.calls:
            if not call.file or (call.n, call.seed) not in want:
                continue
            try:
                got = load_outputs(d, call, ref.layouts[call.n])
                expected = load_outputs(ref_dir, want[(call.n, call.seed)], ref.layouts[call.n])
            except ReportError as e:
                raise EvalFail("runtime_error", f"{e} at {where}") from None
            mismatch, abs_err, norm_err = compare(got, expected, self.task.verify, call.n)
            ver.max_abs_err = max(ver.max_abs_err or 0.0, abs_err)
            ver.max_rel_norm_err = max(ver.max_rel_norm_err or 0.0, norm_err)
            if mismatch:
                raise EvalFail("wrong_answer", f"{mismatch.message} [n={call.n}, {where}]")

    # ---------------------------------------------------------------- evaluate
    def evaluate(self, candidate: Candidate, best: VerifiedBest | None = None) -> EvalResult:
        """Static gate, build, correctness sweep, race check, interleaved timing; with the search's verified `best`,
        plausibility is judged against it and a candidate that may beat it is timed against it too (vs_best).
        Never raises for candidate faults."""
        with self.session():
            return self._evaluate(candidate, best)

    def check_untimed(self, candidate: Candidate, toolchain: Toolchain | None = None) -> tuple[EvalResult, Path | None]:
        """Everything evaluate() does but the timing: static gate, build (with `toolchain`, trusted use only:
        see Toolchain), correctness sweep, race check. For benchmarks that time many programs in one
        interleaved loop (bench/peers.py). Returns the verdict (status ok: verified, not timed) and, when
        it is ok, the binary, whose directory the caller removes."""
        if self.task.language == "cuda":
            raise ValueError("check_untimed is for CPU C-family tasks")
        with self.session():
            return self._checked(candidate, toolchain, timed=False)

    def _evaluate(self, candidate: Candidate, best: VerifiedBest | None = None) -> EvalResult:
        self._reports.pop(candidate.id, None)
        result = self._checked(candidate, None, timed=True, best=best)[0]
        result.compiler_report = self._reports.pop(candidate.id, None)  # None when it did not build
        return result

    def baseline_compiler_report(self) -> str | None:
        """The compiler report (optinfo.py) of the task's baseline kernel, built here when it is not yet: the
        planner's first parent has no evaluation to carry one. None where no report is made (not gcc, CUDA)."""
        with self.session(), placement.hold("shared", what=f"building {self.task.name}'s baseline", on_wait=self.on_phase):
            self.baseline_binary()
        base = Candidate(files={self.task.kernel: self.task.baseline_source()}, author="baseline")
        return self._reports.get(base.id)

    def best_binary(self, best: VerifiedBest) -> Path:
        """The search's best, built once per best (and again only after it changes). Raises EvalFail."""
        if self._best is None or self._best[0] != best.candidate.id:
            if self._best is not None and not self.config.keep_workdirs:
                remove_tree(self._best[1].parent)
            self._best = None
            prog, _ = self.build(best.candidate)
            self._reports.pop(best.candidate.id, None)
            self._best = (best.candidate.id, prog)
        return self._best[1]

    def _checked(self, candidate: Candidate, toolchain: Toolchain | None, timed: bool,
                 best: VerifiedBest | None = None) -> tuple[EvalResult, Path | None]:
        phases: dict[str, float] = {}
        ver = Verification()
        t = time.monotonic()
        cleanup: list[Path] = []
        try:
            why = check_source(self.task, candidate)
            if why:
                raise EvalFail("rejected", why)
            with placement.hold("shared", phases, self._doing("building and checking", candidate), self.on_phase):
                # building and checking run beside other evaluations
                t = time.monotonic()
                self.phase("building")
                base = self.baseline_binary()
                prog, _log = self.build(candidate) if toolchain is None else self.build_with(candidate, toolchain)
                cleanup.append(prog.parent)
                phases["build"] = time.monotonic() - t
                t = time.monotonic()
                self._verify(candidate, base, prog, ver)
                phases["verify"] = time.monotonic() - t
                t = time.monotonic()
                # Which kernels need the check is read from the object gcc built (its OpenMP runtime calls);
                # one that needs it passes only with a clean verdict, unless the user turned it off.
                nm = (prog.parent / "nm.txt").read_text(errors="replace")
                if not race.uses_openmp(nm):
                    ver.race_check, ver.race_detail = "skipped", "the kernel object makes no OpenMP runtime calls"
                elif not (self.config.race_check and self.task.verify.race_check):
                    ver.race_check = "off"
                    ver.race_detail = "turned off (--no-race-check)" if not self.config.race_check else "turned off by the task"
                else:
                    self.phase("race check")
                    ver.race_check, ver.race_detail = race.check(self, candidate, nm)
                    first = ver.race_detail.splitlines()[0] if ver.race_detail else ""
                    if ver.race_check != "clean":  # every other verdict rejects
                        reason = _RACE_REASON.get(ver.race_check, "race check: {}").format(first)
                        raise EvalFail("rejected", reason, ver.race_detail)
                phases["race"] = time.monotonic() - t
            if not timed:  # check_untimed: the caller times it, and owns the binary
                cleanup.remove(prog.parent)
                return EvalResult(candidate_id=candidate.id, status="ok", reason="verified (not timed)", verification=ver,
                                  phase_s=phases), prog
            rounds = self.task.timing_rounds if self.config.rounds is None else self.config.rounds
            with placement.hold("exclusive", phases, self._doing("timing", candidate), self.on_phase):  # timing has the machine to itself
                t = time.monotonic()
                timing = self.time(candidate, base, prog, rounds)
                flags = self.timing_flags(timing, best)
                phases["time"] = time.monotonic() - t
                if timing.significant and flags:
                    # An implausible speedup (a jump past the verified best: timing_flags), or times the process wall
                    # clock does not bear out, is not a verified win until a second, longer measurement in fresh
                    # processes shows it again: the result is that measurement's, significant or not.
                    t = time.monotonic()
                    timing = self.time(candidate, base, prog, self.config.remeasure_rounds, "re-measuring (implausible or inconsistent)")
                    flags = sorted(set(flags) | set(self.timing_flags(timing, best))) + ["rechecked"]
                    phases["recheck"] = time.monotonic() - t
                ver.timed_outputs_checked = True
            result = EvalResult(candidate_id=candidate.id, status="ok", reason=f"verified; {timing.describe()}", verification=ver,
                                timing=timing, flags=flags, phase_s=phases, roofline=self.roofline_for(timing))
            if best is not None and timing.significant and best.candidate.id != candidate.id and best.may_be_beaten(timing):
                self._versus_best(candidate, prog, best, rounds, result)
            return result, None
        except EvalFail as f:
            phases["last"] = time.monotonic() - t
            return EvalResult(candidate_id=candidate.id, status=f.status, reason=f.reason, log=f.log,  # type: ignore[arg-type]
                              verification=ver, phase_s=phases), None
        finally:
            if not self.config.keep_workdirs:
                for p in cleanup:
                    remove_tree(p)

    def _versus_best(self, candidate: Candidate, prog: Path, best: VerifiedBest, rounds: int, result: EvalResult) -> None:
        """Time the candidate interleaved against the best's program (the same rounds and machinery as against the
        baseline, the best's outputs the reference) and record the comparison on `result` (vs_best). A comparison
        that cannot be made (the best no longer builds or runs, the candidate's outputs differ from the best's
        beyond the task's tolerance, or it computes outside its calls relative to the best) decides nothing: the
        result keeps its verdict and gets the flag vs_best_failed, so the search keeps its best."""
        t, waited = time.monotonic(), result.phase_s.get("wait", 0.0)
        try:
            with placement.hold("shared", result.phase_s, self._doing("building the best for", candidate), self.on_phase):
                self.phase(f"building the best, {best.candidate.id[:12]}, to time against it")
                best_prog = self.best_binary(best)
            with placement.hold("exclusive", result.phase_s, self._doing("timing against the best", candidate), self.on_phase):
                pair = self.time(candidate, best_prog, prog, rounds, "timing against the best", best.candidate)
            result.vs_best = PairedComparison.of(best.candidate.id, pair)
            result.reason += f"; {result.vs_best.describe()}"
        except (EvalFail, InfraError) as e:
            result.flags.append("vs_best_failed")
            result.reason += f"; not compared with the best {best.candidate.id[:12]}: {str(e)[:200]}"
        result.phase_s["vs_best"] = time.monotonic() - t - (result.phase_s.get("wait", 0.0) - waited)  # lock waits apart

    def _doing(self, what: str, candidate: Candidate) -> str:
        """What this evaluation holds the host lock for, as waiters see it: 'timing gemm c0007'."""
        return f"{what} {self.task.name} {candidate.id}"

    def _binary(self, path: Path, candidate: Candidate | None, threads: int | None = None, ranks: int | None = None) -> Binary:
        c = candidate or Candidate(files={})
        return Binary(path, threads or c.threads or self.task.timing.threads, ranks or c.ranks or self.task.timing.ranks, c.bind)

    def _verify(self, candidate: Candidate, base: Path, prog: Path, ver: Verification) -> None:
        rng = secrets.SystemRandom()
        lo, hi = self.task.sizes.random
        drawn = [rng.randint(lo, hi) for _ in range(self.task.sizes.random_count)]
        sizes = sorted(set(self.task.sizes.check) | set(drawn))
        seeds = [secrets.randbits(62) for _ in range(self.task.verify.seeds)]
        ver.sizes, ver.seeds = sizes, len(seeds)
        timeout = self.config.verify_timeout_s
        at = f"n={','.join(map(str, sizes))}"
        self.phase(f"verifying: the reference (baseline, serial) at {at}")
        ref, ref_dir, r = self.run_driver(self._binary(base, None, threads=1, ranks=1), sizes, seeds, False, timeout)
        try:
            if not (r.ok and ref.complete):
                raise InfraError(f"baseline failed during verification: {describe_exit(r)}: {tail(r.stderr, 3)}")
            counts = self.task.verify.ranks if self.task.uses_mpi else (self.task.verify.threads if self.task.uses_openmp else [1])
            for _ in range(self.task.verify.repeat):
                for k in counts:
                    b = self._binary(prog, candidate, ranks=k) if self.task.uses_mpi else self._binary(prog, candidate, threads=k)
                    where = f"{k} ranks" if self.task.uses_mpi else f"{k} threads"
                    self.phase(f"verifying at {at} on {where}")
                    run, d, r = self.run_driver(b, sizes, seeds, False, timeout)
                    try:
                        self._check_run(run, r, where, timeout)
                        self._compare_dirs(run, d, ref, ref_dir, where, ver)
                    finally:
                        remove_tree(d)
            if self.task.uses_mpi:
                ver.ranks = list(counts)
            elif self.task.uses_openmp:
                ver.threads = list(counts)
        finally:
            remove_tree(ref_dir)

    def time(self, candidate: Candidate, base: Path, prog: Path, rounds: int, label: str = "timing",
             base_candidate: Candidate | None = None) -> TimingStats:
        """Interleave baseline and candidate processes; every timed output is checked against the baseline's.
        `label` names the phase on the display ("timing round 2/5"). With `base_candidate` (the search's best),
        `base` is that candidate's program, run with its own knobs, in the baseline's place: the paired comparison."""
        task, cfg = self.task, self.config
        reps = cfg.reps or task.timing.reps
        cand_b = self._binary(prog, candidate)
        base_b = (self._binary(base, None, threads=cand_b.threads) if base_candidate is None
                  else self._binary(base, base_candidate))
        base_name = "baseline" if base_candidate is None else "best"
        per_process: dict[str, list[list[float]]] = {"base": [], "cand": []}
        # Per round: (process wall, sum of reported call times) for each side, to cross-check the
        # driver's in-process timings against the sandbox's own clock.
        walls: list[dict[str, tuple[float, float]]] = []
        outside: list[tuple[float, float, float]] = []  # per round: (cand CPU outside windows, base's, base's inside)
        # A round the machine disturbed (stats.disturbed, judged on the baseline process alone, so the candidate
        # cannot pick rounds) is run again, both processes, up to max_reruns times; past that the machine is too
        # busy and the result says so (never significant). Its samples are set aside, used only then.
        reruns: list[str] = []
        max_reruns = max(2, (rounds + 1) // 2)
        set_aside: dict[str, list[list[float]]] = {"base": [], "cand": []}
        shares: list[float] = []  # per kept round: the candidate process's stats.cpu_share
        busy = False
        rnd = 0
        while rnd < rounds:
            # Every call of every process gets inputs of its own, fresh each round (both sides of a round
            # share them, so their outputs can be compared): a kernel that caches results by input content,
            # pointer or shape, in memory or in a file, never finds a repeat to replay.
            seeds = [secrets.randbits(62) for _ in range(task.timing.warmup + reps)]
            dirs: dict[str, tuple[DriverRun, Path]] = {}
            round_walls: dict[str, tuple[float, float]] = {}
            cpu: dict[str, tuple[float, float]] = {}
            order = ("base", "cand") if rnd % 2 == 0 else ("cand", "base")
            try:
                for who in order:
                    b = base_b if who == "base" else cand_b
                    self.phase(f"{label} round {rnd + 1}/{rounds}: {base_name if who == 'base' else 'candidate'}, "
                               f"{task.timing.warmup}+{reps} calls at n={task.sizes.timing}")
                    run, d, r = self.run_driver(b, [task.sizes.timing], seeds, True, task.timing.timeout_s,
                                                warmup=task.timing.warmup, reps=reps)
                    dirs[who] = (run, d)
                    if who == "base" and not (r.ok and run.complete):
                        raise InfraError(f"{base_name} failed while timing: {describe_exit(r)}: {tail(r.stderr, 3)}")
                    self._check_run(run, r, f"timing size n={task.sizes.timing}", task.timing.timeout_s)
                    round_walls[who] = (r.wall_s, sum(c.time for c in run.calls))
                    cpu[who] = (sum(c.cpu_out for c in run.calls), sum(c.cpu_in for c in run.calls))
                walls.append(round_walls)
                outside.append((cpu["cand"][0], cpu["base"][0], cpu["base"][1]))
                # Work moved out of the windows does not pay: each call, the candidate's and the baseline's alike,
                # is charged, as time, the CPU it used outside its window beyond the baseline's typical call of the
                # round (the fill) and a margin for idle workers' or ranks' polling and the fill's noise (5% of it),
                # the margin at most 1% of the baseline's call (on millisecond calls a fixed margin was room to hide
                # work in: the red team's fill-phase hook read 1.08x). Charging both sides keeps an A/A unbiased.
                fill = stats.median([c.cpu_out for c in dirs["base"][0].calls])
                timed = [c for c in dirs["base"][0].calls if not c.warmup]
                margin = min(0.05 * fill + (0.002 * cand_b.ranks if task.uses_mpi else 0.0001 * cand_b.threads),
                             0.01 * stats.median([c.time for c in timed]))
                ref = stats.median(per_process["base"]) if len(per_process["base"]) >= 2 else None
                why = stats.disturbed([c.cpu_in for c in timed], [c.time for c in timed], ref, cpu=not task.uses_gpu,
                                      others=[c.others for c in timed])
                kept = per_process if not why else set_aside
                kept["base"].append([c.time + max(0.0, c.cpu_out - fill - margin) for c in timed])
                if not why and not task.uses_gpu:
                    cand_timed = [c for c in dirs["cand"][0].calls if not c.warmup]
                    shares.append(stats.cpu_share([c.cpu_in for c in cand_timed], [c.time for c in cand_timed]))
                kept["cand"].append([c.time + max(0.0, c.cpu_out - fill - margin) for c in dirs["cand"][0].calls
                                     if not c.warmup])
                self._compare_dirs(*dirs["cand"], *dirs["base"], f"timed run, round {rnd + 1}", Verification())
            finally:
                for _, d in dirs.values():
                    remove_tree(d)
            if why:
                reruns.append(f"round {rnd + 1}: {why}")
                if len(reruns) > max_reruns:
                    busy = True
                    break
                self.phase(f"{label}: round {rnd + 1} disturbed ({why}); running it again")
                continue
            rnd += 1
            if rnd >= 2 and stats.median(per_process["cand"]) > cfg.early_stop_ratio * stats.median(per_process["base"]):
                break
        self._check_outside(outside, cand_b, task.timing.warmup + reps)
        if busy:  # every round run, disturbed or not: figures to show, never a verdict
            per_process = {k: per_process[k] + set_aside[k] for k in per_process}
        # Kernel-time savings the wall clock does not show mean the reported times are not real.
        consistent = stats.walls_consistent(walls, 0.3 if task.uses_mpi else 0.15, noise=not task.uses_gpu)
        result = stats.timing_stats(per_process["base"], per_process["cand"], consistent=consistent, reruns=reruns,
                                    machine_busy=busy, threads=cand_b.threads if task.uses_openmp else None,
                                    ranks=cand_b.ranks if task.uses_mpi else None)
        # A candidate process that got much less CPU than its own usual share was slowed by the machine: a verdict
        # that is not significant then cannot tell "not faster" from "disturbed" (a significant one stands: being
        # slowed only ever hides a speedup). Never re-run for it: the candidate controls its own CPU use.
        starved = [f"round {i + 1}: the candidate got {shares[i] / stats.median(shares):.0%} of its usual CPU share "
                   f"(not re-run)" for i in stats.starved(shares)]
        if starved and not result.significant:
            result = result.model_copy(update={"machine_busy": True, "reruns": reruns + starved})
        return result

    def _check_outside(self, outside: list[tuple[float, float, float]], b: Binary, calls: int) -> None:
        """Refuse a candidate that computes outside the timed windows. The monitor reads the measured
        processes' CPU clocks whenever it stops them; what they used between one window's end and the
        next one's start is the harness's fill (the baseline's figure, same harness, same inputs) plus
        whatever the kernel left running or started early. time() charges every call its excess as
        time, so hiding work never pays; this refusal names the gross cases. Allowed on top of the
        baseline's: a quarter of the *baseline's* CPU inside the calls (the work itself, which a
        candidate cannot inflate), and per call 0.5 ms per OpenMP thread (idle workers spinning down,
        ~0.1 ms with GOMP_SPINCOUNT set low; lock contention in a `critical` section measured ~0.3 ms)
        or 5 ms per MPI rank (ranks poll while rank 0 talks to the monitor: 2-11 ms measured)."""
        extra = stats.median([cand - base for cand, base, _ in outside])
        work = stats.median([i for _, _, i in outside])
        per_call = 0.005 * b.ranks if self.task.uses_mpi else 0.0005 * (b.threads if self.task.uses_openmp else 1)
        allowed = calls * per_call + 0.25 * work
        if extra > allowed:
            raise EvalFail("rejected", f"computes outside the timed call: {extra * 1e3:.1f} ms of CPU per process beyond the "
                           f"baseline's between calls (allowed {allowed * 1e3:.1f} ms; the baseline's calls take {work * 1e3:.1f} ms of CPU)")

    def remeasure(self, candidate: Candidate) -> EvalResult:
        """Re-time a verified candidate in fresh builds and fresh directories, with more rounds."""
        with self.session():
            return self._remeasure(candidate)

    def _remeasure(self, candidate: Candidate) -> EvalResult:
        self._baseline = None
        self._trusted = None
        t = time.monotonic()
        prog: Path | None = None
        try:
            with placement.hold("shared", what=self._doing("building to re-measure", candidate), on_wait=self.on_phase):
                self.phase("re-measuring: building afresh")
                prog, _ = self.build(candidate)
                base = self.baseline_binary()
            with placement.hold("exclusive", what=self._doing("re-measuring", candidate), on_wait=self.on_phase):
                timing = self.time(candidate, base, prog, self.config.remeasure_rounds, "re-measuring")
        except EvalFail as f:
            return EvalResult(candidate_id=candidate.id, status=f.status, reason=f"re-measurement: {f.reason}", log=f.log)  # type: ignore[arg-type]
        finally:
            if prog is not None and not self.config.keep_workdirs:
                remove_tree(prog.parent)
        return EvalResult(candidate_id=candidate.id, status="ok", timing=timing, phase_s={"time": time.monotonic() - t},
                          reason=f"re-measured; {timing.describe()}", flags=self.timing_flags(timing),
                          verification=Verification(timed_outputs_checked=True), roofline=self.roofline_for(timing))

    def roofline_for(self, timing: TimingStats) -> Roofline | None:
        """The candidate's roofline figures for this timing: None when the task declares no [roofline], the
        target is a GPU, or no hardware profile is cached for this sandbox."""
        spec = self.task.roofline
        if spec is None or self.task.uses_gpu:
            return None
        if not self._profile_read:
            from kernopt.hw.probe import cached_profile

            self._profile, self._profile_read = cached_profile(self.sandbox), True
        if self._profile is None:
            return None
        from kernopt.hw.roofline import for_timing

        return for_timing(self.task, spec, timing, self._profile)

    def close(self) -> None:
        if not self.config.keep_workdirs:
            remove_tree(self.workroot)
        self._best = None
