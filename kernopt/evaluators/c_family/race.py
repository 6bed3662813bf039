"""The OpenMP race check: clang ThreadSanitizer with the LLVM OpenMP runtime's Archer support.

Which kernels: those whose object, as the production compiler built it, calls the OpenMP runtime
(GOMP_*, __kmpc_*, omp_*), whatever their text says (a direct GOMP_parallel call has no `omp` in it).
What is built: the kernel as the production compiler preprocesses it (its conditionals decided and
its macros expanded by gcc, system headers put back as #include lines), so nothing can take one
branch under gcc and another under clang. How: clang at -O1 and -O0, run at several thread counts
(not 2 alone: two-thread runs find the fewest races) and at the count the candidate is timed at,
OMP_DYNAMIC=false so every run gets the threads asked for, a longer access history. What was
measured to choose this: docs/verification.md, "Race check".

Two checks, because a dynamic one can be dodged (a kernel can tell it is instrumented and behave only
then, or store through an uninstrumented library call): first the static check of the preprocessed
source (race_static.py: the data sharing of every parallel region, the work-shared loops' writes proven
disjoint by the dependence analysis), then the sanitizer runs. The sanitizer program runs behind the
same walls as every other run of candidate code: the monitor, the system-call filter (a variant that
keeps the report descriptor out of the kernel's reach), W^X, full RELRO, the sandbox's limits.

The dynamic verdict is read from every report in the report file (tsan_report.py: parsed as the
candidate's to forge, nothing copied out as text), not from the exit code: the sanitizer
also exits with its code when it crashes, and a crash is "unavailable", not "race". A report whose
racy location is a heap block the OpenMP runtime allocated for itself (a task's descriptor, reused)
is not counted: Archer does not see the runtime's own ordering of that memory. Anything that keeps
the check from running (no clang, no sanitizer runtime, a kernel clang cannot compile, a construct
the sanitizer crashes on) is "unavailable" with its reason and fix, which the evaluator rejects
unless the user turned the check off.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shlex
import shutil
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from kernopt.candidate import Candidate
from kernopt.config import EvalConfig
from kernopt.errors import InfraError
from kernopt.evaluators.base import RELRO, Binary, describe_exit, tail
from kernopt.evaluators.c_family import race_static, tsan_report
from kernopt.evaluators.c_family.compare import DriverRun
from kernopt.evaluators.c_family.static_gate import check_text
from kernopt.sandbox import ExecResult, Sandbox
from kernopt.sandbox.tree import remove_tree
from kernopt.task import Task

# exitcode=0: reports do not change how the program ends (the monitor fails a run that exits non-zero); the
# verdict comes from the reports, so a run whose only reports are on the runtime's memory still completes.
# symbolize=0: the program runs behind the system-call filter and cannot start a symbolizer; kernopt symbolizes
# the offsets itself (tsan_report.py).
TSAN_OPTIONS = ("history_size=7 ignore_noninstrumented_modules=1 halt_on_error=0 exitcode=0 report_signal_unsafe=0 "
                "symbolize=0")
RACE_ENV = {"TSAN_OPTIONS": TSAN_OPTIONS, "OMP_DYNAMIC": "false"}
REPORT_FILE = "tsan.log"  # in the run's directory: the monitor creates it for the sanitizer (KO_REPORT_FD)
BINARY = "race"
RUN_BINARY = "prog"  # its name where it runs (run_driver copies every program to ./prog): the reports' module name
Verdict = Literal["clean", "race", "unavailable", "skipped", "off", "forged", "unproven"]
# What to install where the sanitizer build cannot link or find its headers (Debian/Ubuntu names).
TSAN_PACKAGE = "libclang-rt-dev (Debian 12: libclang-rt-14-dev)"
FIX = {"clang": "install clang (apt-get install clang libomp-dev libclang-rt-dev)",
       "tsan": f"install clang's ThreadSanitizer runtime, {TSAN_PACKAGE}",
       "libomp": "install the LLVM OpenMP runtime, libomp-dev"}

# An undefined reference to the OpenMP runtime in `nm -P kernel.o` (name, then type U or w).
_OPENMP_SYMBOL = re.compile(r"^(GOMP_\w+|__kmpc_\w+|omp_\w+)\s+[Uw]\b", re.M)
_DEFINED_SYMBOL = re.compile(r"^(\S+)\s+[TtWw]\b", re.M)
# Flags that change what the preprocessor sees (instruction sets, language standard, floating-point
# model, defines): the sanitizer build gets them too, so `#ifdef __AVX2__` picks the same code.
_MACRO_FLAG = re.compile(
    r"-march=\S+|-mtune=\S+|-m(no-)?(avx|avx2|fma|avx512f|sse4\.2)|-mprefer-vector-width=\d+|-std=\S+|-[DU]\S+"
    r"|-f(no-)?(fast-math|unsafe-math-optimizations|associative-math|reciprocal-math|finite-math-only|signed-zeros"
    r"|trapping-math|openmp-simd)|-ffp-contract=\S+")
# Constructs clang 14's Archer crashes on (a crash is "unavailable", named by the construct when the kernel has one).
_CRASHY = re.compile(r"\bdepend\s*\(")


class Host(Protocol):
    """What the race check needs of the evaluator that runs it (the C-family evaluator): its task and
    config, fresh directories, sandboxed steps, and runs of a program under the monitor."""

    task: Task
    config: EvalConfig
    sandbox: Sandbox

    def phase(self, text: str) -> None: ...
    def new_dir(self, label: str) -> Path: ...
    def stage_trusted_sources(self, d: Path) -> str: ...
    def run_step(self, cmd: list[str], cwd: Path, timeout: float, env: dict[str, str] | None = None,
                 memory_mb: int | None = -1) -> ExecResult: ...
    def run_driver(self, b: Binary, sizes: list[int], seeds: list[int], timing: bool, timeout: float, warmup: int = 0,
                   reps: int = 0, extra_env: dict[str, str] | None = None, memory_mb: int | None = -1,
                   report: str | None = None) -> tuple[DriverRun, Path, ExecResult]: ...


def uses_openmp(nm_output: str) -> bool:
    """Does the kernel object (`nm -P kernel.o`) call the OpenMP runtime?"""
    return bool(_OPENMP_SYMBOL.search(nm_output))


@dataclass
class Judgement:
    """One sanitizer run's report file, read as the candidate's to forge (tsan_report.py)."""

    races: list[str] = field(default_factory=list)  # the counted races, as kernopt states them (validated parts only)
    runtime: int = 0  # race reports on the OpenMP runtime's own memory: not counted
    crash: str = ""  # a fixed phrase when the sanitizer died
    forged: str = ""  # a fixed phrase when the file is not what the sanitizer writes


def judge(text: str, symbolize: Callable[[list[int]], dict[int, tsan_report.Place]], sources: dict[str, int],
          defined: set[str]) -> Judgement:
    """Judge a report file, parsed once; `symbolize` names the offsets into the program it reports (see
    sanitizer_run: kernopt's addr2line on its own binary)."""
    j = Judgement()
    try:
        parsed = tsan_report.parse(text, RUN_BINARY)
        j.crash = parsed.crash
        places = symbolize(tsan_report.offsets(parsed, RUN_BINARY)) if parsed.races else {}
        for r in parsed.races:
            if tsan_report.runtime_memory(r, places, RUN_BINARY):
                j.runtime += 1
            else:
                j.races.append(tsan_report.describe(r, places, RUN_BINARY, sources, defined))
    except tsan_report.Forged as e:
        j.forged = str(e)
    return j


def _build_failure(stderr: str, compiler: str) -> str:
    """Why the sanitizer build failed, and the fix, in one line."""
    if "libclang_rt.tsan" in stderr or "sanitizer/common_interface_defs.h" in stderr:  # the runtime or its headers
        return f"clang's ThreadSanitizer runtime is missing ({FIX['tsan']})"
    if re.search(r"omp\.h.*(not found|No such file)|cannot find -lomp|unable to find library -lomp", stderr):
        return f"the LLVM OpenMP runtime is missing ({FIX['libomp']})"
    if re.search(rf"{re.escape(compiler)}: (not found|No such file)|{re.escape(compiler)}: command not found|exec.*{re.escape(compiler)}", stderr):
        return f"{compiler} not found ({FIX['clang']})"
    first = next((ln.strip() for ln in stderr.splitlines() if "error" in ln), tail(stderr, 1).strip())
    return f"clang cannot build the kernel for the sanitizer ({first[:200]}): write C that clang compiles as well"


_LINEMARKER = re.compile(r'^# (\d+) "((?:[^"\\]|\\.)*)"((?: \d+)*)$')
_INCLUDE_TARGET = re.compile(r"^\s*#\s*include\s*<([^<>]+)>", re.M)
MAX_PREPROCESSED_BYTES = 64 << 20


def restore_includes(preprocessed: str, source: str, main: str = "kernel.c") -> str:
    """`gcc -E -dD` output of `main`, turned back into a C file any compiler can build: the kernel's own
    lines as gcc preprocessed them (its conditionals decided and its macros expanded with gcc's
    predefined macros), each system header it included put back as its `#include <...>` line (so
    clang compiles against its own headers and OpenMP runtime), and the kernel's feature-test
    `#define _X` lines kept where they were. Raises Unavailable when an included file cannot be named."""
    targets = sorted(set(_INCLUDE_TARGET.findall(source)), key=len, reverse=True)
    out: list[str] = []
    in_main = False
    for line in preprocessed.splitlines():
        m = _LINEMARKER.match(line)
        if m:
            name, flags = m.group(2), m.group(3).split()
            if name == main:
                out.append(f'#line {m.group(1)} "{main}"' if m.group(1) != "0" else "")
                in_main = True
            else:
                if in_main and "1" in flags:  # the kernel includes this header here
                    target = next((t for t in targets if name.endswith("/" + t)), None)
                    if target is None:
                        raise Unavailable(f"the kernel includes {name}, which is none of its #include <...> lines")
                    out.append(f"#include <{target}>")
                in_main = False
            continue
        if not in_main:
            continue
        d = re.match(r"#\s*(define|undef)\s+(\w+)", line)
        out.append(line if d is None or d.group(2).startswith("_") else "")
    return "\n".join(out) + "\n"


def preprocess(ev: Host, candidate: Candidate) -> str:
    """The kernel as the production compiler preprocesses it with the production flags, includes put
    back (restore_includes): what the sanitizer build compiles, so a kernel cannot take one branch
    under gcc and another under clang (`#ifdef __clang__`, `_OPENMP` versions, `__OPTIMIZE__`,
    instruction-set macros, names pasted together with ##). Raises Unavailable."""
    task, cfg = ev.task, ev.config
    d = ev.new_dir("race-cpp")
    try:
        (d / "kernel.c").write_text(candidate.files[task.kernel])
        production = [*task.build.cflags, *(["-fopenmp"] if task.uses_openmp else []), *candidate.cflags, *candidate.define_flags]
        cc = [task.compiler, *production, "-E", "-dD", "kernel.c", "-o", "kernel.i"]
        r = ev.run_step(cc, d, cfg.build_timeout_s)
        out = d / "kernel.i"
        if not r.ok or not out.is_file():
            raise Unavailable(f"{task.compiler} -E failed on the kernel: {tail(r.stderr, 1)[:200]}")
        if out.stat().st_size > MAX_PREPROCESSED_BYTES:
            raise Unavailable(f"the preprocessed kernel is larger than {MAX_PREPROCESSED_BYTES >> 20} MiB")
        source = restore_includes(out.read_text(errors="replace"), candidate.files[task.kernel])
    finally:
        if not cfg.keep_workdirs:
            remove_tree(d)
    # What macros built out of pieces (## pasting) the text gate could not read: inline assembly the
    # sanitizer does not instrument, attributes that turn it off.
    # (the #line lines are restore_includes' own: a kernel's own are refused before it is built)
    why = check_text(re.sub(r"(?m)^#line .*$", "", source))
    if why:
        raise Unavailable(f"the kernel as {task.compiler} preprocesses it is refused: {why}")
    return source


def sanitizer_flags(ev: Host, candidate: Candidate) -> list[str]:
    """The production build's flags that change the preprocessed text, for the sanitizer build."""
    return [f for f in [*ev.task.build.cflags, *candidate.cflags] if _MACRO_FLAG.fullmatch(f)] + list(candidate.define_flags)


class Unavailable(Exception):
    """The sanitizer build could not be made: the message is why, and the fix."""


@dataclass(frozen=True)
class Program:
    """A sanitizer build: the binary (in a directory of its own) and the kernel object's defined functions."""

    exe: Path
    defined: frozenset[str]


@contextlib.contextmanager
def sanitizer_binary(ev: Host, candidate: Candidate, opt: str, source: str) -> Iterator[Program]:
    """Build `source` (the candidate's kernel as preprocess() returned it) with ThreadSanitizer at `opt`
    in one sandboxed step; yields the program (in a directory removed afterwards). Raises Unavailable.
    The driver is built with -DKO_TSAN: the measured program's system-call filter with the report
    descriptor protected (c/seccomp.h, KO_CONFINE_SANITIZER), the OpenMP runtime started before it."""
    cfg = ev.config
    d = ev.new_dir("race")
    b_dir: Path | None = None
    try:
        harness = ev.stage_trusted_sources(d)
        (d / "kernel.c").write_text(source)
        flags = [cfg.race_compiler, "-fopenmp", "-fsanitize=thread", "-g", *sanitizer_flags(ev, candidate), opt]
        compile_ = [*flags, "-c", "kernel.c", "-o", "kernel.o"]
        link = [*flags, "-I.", "-DKO_TSAN", "driver.c", harness, "kernel.o", "-lm", *RELRO, "-o", BINARY]
        r = ev.run_step(["sh", "-c", f"{shlex.join(compile_)} && nm -P kernel.o > nm.txt && {shlex.join(link)}"], d,
                        cfg.build_timeout_s)
        if not r.ok:
            raise Unavailable(f"{_build_failure(r.stderr, cfg.race_compiler)}\n{tail(r.stderr, 15)}")
        b_dir = ev.new_dir("race-bin")
        shutil.copy(d / BINARY, b_dir / BINARY)
        defined = frozenset(_DEFINED_SYMBOL.findall((d / "nm.txt").read_text(errors="replace")[:2_000_000]))
        if not cfg.keep_workdirs:
            remove_tree(d)
        yield Program(b_dir / BINARY, defined)
    finally:
        if not cfg.keep_workdirs:
            remove_tree(d)
        if b_dir is not None:
            remove_tree(b_dir)


def _symbolize(ev: Host, prog: Program, offsets: list[int]) -> dict[int, tsan_report.Place]:
    """kernopt's own symbolization of offsets into the sanitizer binary (addr2line, a sandboxed step)."""
    r = ev.run_step(["addr2line", "-f", "-a", "-e", BINARY, *(hex(o) for o in offsets[:2000])], prog.exe.parent,
                    ev.config.build_timeout_s)
    if not r.ok:
        raise InfraError(f"addr2line failed on the race check's binary ({describe_exit(r)})")
    return tsan_report.read_addr2line(r.stdout)


def sanitizer_run(ev: Host, prog: Program, threads: int, seeds: list[int], source: str) -> tuple[Judgement, str]:
    """Run a sanitizer binary once at the task's race size, its reports going to a file the monitor opens;
    returns the judgement and, when the run failed without a race report, why (kernopt's words: the
    monitor's report, or how the process ended; never the program's output)."""
    cfg = ev.config
    run, rd, r = ev.run_driver(Binary(prog.exe, threads, 1, None), [ev.task.sizes.race], seeds, False,
                               cfg.verify_timeout_s * 2, extra_env=RACE_ENV, memory_mb=None, report=REPORT_FILE)
    try:
        text = _read_report(rd / REPORT_FILE)
    finally:
        remove_tree(rd)
    harness = Path(ev.task.harness).name
    sources = {"kernel.c": source.count("\n") + 1, "driver.c": 100_000, harness: 100_000}
    j = judge(text, lambda offsets: _symbolize(ev, prog, offsets), sources, set(prog.defined))
    if j.races or j.forged:
        return j, ""
    if j.crash:
        if _CRASHY.search(source):
            j.crash = "ThreadSanitizer's OpenMP support (clang 14) crashes on task dependences"
        return j, j.crash
    if r.timed_out:
        return j, "the sanitizer run timed out"
    if not (run.complete and r.ok):
        return j, f"the sanitizer run failed without a race report: {run.error or describe_exit(r)}"
    return j, ""


def _read_report(path: Path) -> str:
    """The report file as text, at most MAX_REPORT_BYTES (a longer one is cut: parse() then refuses its last
    line if that was cut mid-line, which only a kernel writing to the descriptor causes)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return ""
    except OSError as e:
        raise InfraError(f"cannot read the sanitizer's report file: {e.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "\0"  # not a regular file: parse() calls it forged
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(tsan_report.MAX_REPORT_BYTES).decode("utf-8", errors="replace")
    finally:
        os.close(fd)


def race_plan(ev: Host, candidate: Candidate) -> list[tuple[str, list[int]]]:
    """(optimization level, thread counts) of the sanitizer runs: the configured ones, and the -O1 build
    also at the thread count the candidate is timed at (a kernel must not race only where it is timed)."""
    timed = candidate.threads or ev.task.timing.threads
    o1 = sorted(set(ev.config.race_threads) | {timed}) if ev.config.race_threads else []
    return [(opt, threads) for opt, threads in (("-O1", o1), ("-O0", list(ev.config.race_threads_o0))) if threads]


_PARALLEL_RUNTIME = re.compile(r"^(GOMP_\w+|__kmpc_\w+)\s+[Uw]\b", re.M)


def static_verdict(source: str, nm_output: str) -> race_static.StaticVerdict:
    """The static race check of the kernel as gcc preprocessed it. A kernel with no OpenMP construct in its
    text is proven only when its object calls nothing but the OpenMP API's queries (omp_get_thread_num and
    the like): a team started another way (a direct GOMP_parallel call) is beyond the text's reach."""
    v = race_static.check(source)
    if v.verdict == "none":
        if _PARALLEL_RUNTIME.search(nm_output):
            return race_static.StaticVerdict("unknown", (), 0)
        return race_static.StaticVerdict("proven", (), 0)
    return v


def sanitizer_blind(source: str) -> bool:
    """Could the kernel store where the sanitizer does not look (race_static.blind_calls: libm's output pointers,
    function pointers, functions the file does not define)? For such a kernel a clean sanitizer run says nothing."""
    return bool(race_static.blind_calls(source))


def _findings(v: race_static.StaticVerdict, limit: int = 3) -> str:
    """The static check's findings, from validated parts only (a line number, an identifier, kernopt's phrase)."""
    parts = [f"kernel.c:{f.line}: `{f.name}` {f.why}" for f in v.findings[:limit] if tsan_report.valid_name(f.name)]
    more = f" (and {len(v.findings) - limit} more)" if len(v.findings) > limit else ""
    return "; ".join(parts) + more if parts else "a construct outside what it models"


def dynamic(ev: Host, candidate: Candidate, source: str) -> tuple[Verdict, str]:
    """The sanitizer runs of race_plan() on `source` (preprocess()'s): race, forged, unavailable or clean, with the
    detail in kernopt's words."""
    task = ev.task
    if re.search(r"^\s*#\s*pragma\s+omp\b.*\bteams\b", source, re.M):
        # clang 14's Archer crashes on `teams`, or reports races on race-free ones (u01 in the race suite)
        return "unavailable", "ThreadSanitizer's OpenMP support (clang 14) cannot judge `teams`"
    plan = race_plan(ev, candidate)
    problems: list[str] = []
    not_counted = 0
    seeds = [secrets.randbits(62), secrets.randbits(62)]
    ev.phase("race check: building with ThreadSanitizer")
    for opt, threads in plan:
        try:
            with sanitizer_binary(ev, candidate, opt, source) as prog:
                for t in threads:
                    ev.phase(f"race check: ThreadSanitizer ({opt}) at n={task.sizes.race} on {t} threads")
                    j, problem = sanitizer_run(ev, prog, t, seeds, source)
                    not_counted += j.runtime
                    if j.forged:
                        return "forged", (f"forged sanitizer output at {t} threads ({opt}): {j.forged} (the report file "
                                          f"is written by the sanitizer alone, unless the kernel writes to it)")
                    if j.races:
                        more = f"; {len(j.races) - 1} more in this run" if len(j.races) > 1 else ""
                        return "race", f"ThreadSanitizer reported a data race at {t} threads ({opt}): {j.races[0]}{more}"
                    if j.crash:  # it crashes again at every count: nothing more to learn
                        return "unavailable", f"{problem} at {t} threads ({opt})"
                    if problem:
                        problems.append(f"{problem} at {t} threads ({opt})")
        except Unavailable as e:
            return "unavailable", str(e)
    if problems:
        return "unavailable", "; ".join(problems[:2])
    runs = " and ".join(f"{opt} at {', '.join(map(str, threads))} threads" for opt, threads in plan)
    note = f"; {not_counted} report(s) on memory the OpenMP runtime allocated were not counted" if not_counted else ""
    return "clean", f"ThreadSanitizer reported no race at {runs}{note}"


def check(ev: Host, candidate: Candidate, nm_output: str) -> tuple[Verdict, str]:
    """Race-check the candidate whose production object `nm -P` listed as `nm_output`. Returns (verdict, detail):
    the detail's first line is the reason (for `unavailable`: what to do about it). How the two checks
    combine (docs/verification.md, "Race check"): a race either finds is a race; a forged report is
    `forged`; clean means no race reported by the sanitizer and either proven from the source, or (the
    static check cannot tell) the kernel makes no store the sanitizer cannot see; a kernel that may
    store where the sanitizer is blind and that the static check cannot prove is `unproven` (rejected).
    eval.race_static = "require" rejects every kernel the static check cannot prove."""
    task, cfg = ev.task, ev.config
    if not uses_openmp(nm_output):
        return "skipped", "the kernel object makes no OpenMP runtime calls"
    if task.uses_mpi or task.uses_gpu:
        return "unavailable", f"the race check does not run {task.target} programs"
    if ev.sandbox.name == "local" and shutil.which(cfg.race_compiler) is None:  # the sandbox image has clang
        return "unavailable", f"{cfg.race_compiler} not found ({FIX['clang']})"
    ev.phase("race check: reading the source")
    try:
        source = preprocess(ev, candidate)
    except Unavailable as e:
        return "unavailable", str(e)
    static = static_verdict(source, nm_output)
    if static.verdict == "race":
        return "race", f"the static race check found a data race: {_findings(static)}"
    verdict, detail = dynamic(ev, candidate, source)
    if verdict != "clean":
        return verdict, detail
    if static.verdict == "proven":
        regions = f"{static.regions} parallel construct(s)" if static.regions else "no parallel construct"
        return "clean", f"proven race-free from the source ({regions}); {detail}"
    blind = sanitizer_blind(source)
    if cfg.race_static == "dynamic" and not blind:
        return "clean", f"{detail} (the static check could not prove it: {_findings(static)})"
    why = ("it stores through a library call or a function the sanitizer does not watch, so a clean sanitizer run is no "
           "proof" if blind else "eval.race_static is require")
    return "unproven", (f"the static race check could not prove the kernel race-free ({_findings(static)}), and {why}. "
                        f"Use a reduction clause, atomic or critical, private copies, or write shared arrays only at the "
                        f"work-shared loop's index ({detail})")
