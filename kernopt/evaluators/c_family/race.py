"""The OpenMP race check: clang ThreadSanitizer with the LLVM OpenMP runtime's Archer support.

Which kernels: those whose object, as the production compiler built it, calls the OpenMP runtime
(GOMP_*, __kmpc_*, omp_*), whatever their text says (a direct GOMP_parallel call has no `omp` in it).
What is built: the kernel as the production compiler preprocesses it (its conditionals decided and
its macros expanded by gcc, system headers put back as #include lines), so nothing can take one
branch under gcc and another under clang. How: clang at -O1 and -O0, run at several thread counts
(not 2 alone: two-thread runs find the fewest races) and at the count the candidate is timed at,
OMP_DYNAMIC=false so every run gets the threads asked for, a longer access history. What was
measured to choose this: docs/verification.md, "Race check".

The verdict is read from every report in the run's output, not from the exit code: the sanitizer
also exits with its code when it crashes, and a crash is "unavailable", not "race". A report whose
racy location is a heap block the OpenMP runtime allocated for itself (a task's descriptor, reused)
is not counted: Archer does not see the runtime's own ordering of that memory. Anything that keeps
the check from running (no clang, no sanitizer runtime, a kernel clang cannot compile, a construct
the sanitizer crashes on) is "unavailable" with its reason and fix, which the evaluator rejects
unless the user turned the check off.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import shlex
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from kernopt.candidate import Candidate
from kernopt.evaluators.base import Binary, tail
from kernopt.evaluators.c_family.static_gate import check_text

if TYPE_CHECKING:
    from kernopt.evaluators.c_family.evaluator import CFamilyEvaluator

RACE_MARK = "WARNING: ThreadSanitizer: data race"
# exitcode=0: reports do not change how the program ends (the monitor fails a run that exits non-zero); the
# verdict comes from the report text, so a run whose only reports are on the runtime's memory still completes.
TSAN_OPTIONS = "history_size=7 ignore_noninstrumented_modules=1 halt_on_error=0 exitcode=0 report_signal_unsafe=0"
RACE_ENV = {"TSAN_OPTIONS": TSAN_OPTIONS, "OMP_DYNAMIC": "false"}
Verdict = Literal["clean", "race", "unavailable", "skipped", "off"]
# What to install where the sanitizer build cannot link or find its headers (Debian/Ubuntu names).
TSAN_PACKAGE = "libclang-rt-dev (Debian 12: libclang-rt-14-dev)"
FIX = {"clang": "install clang (apt-get install clang libomp-dev libclang-rt-dev)",
       "tsan": f"install clang's ThreadSanitizer runtime, {TSAN_PACKAGE}",
       "libomp": "install the LLVM OpenMP runtime, libomp-dev"}

# An undefined reference to the OpenMP runtime in `nm -P kernel.o` (name, then type U or w).
_OPENMP_SYMBOL = re.compile(r"^(GOMP_\w+|__kmpc_\w+|omp_\w+)\s+[Uw]\b", re.M)
# Flags that change what the preprocessor sees (instruction sets, language standard, floating-point
# model, defines): the sanitizer build gets them too, so `#ifdef __AVX2__` picks the same code.
_MACRO_FLAG = re.compile(
    r"-march=\S+|-mtune=\S+|-m(no-)?(avx|avx2|fma|avx512f|sse4\.2)|-mprefer-vector-width=\d+|-std=\S+|-[DU]\S+"
    r"|-f(no-)?(fast-math|unsafe-math-optimizations|associative-math|reciprocal-math|finite-math-only|signed-zeros"
    r"|trapping-math|openmp-simd)|-ffp-contract=\S+")
_FRAME = re.compile(r"^\s*#\d+ (\S+) .*?\(([^()+\s]+)\+0x[0-9a-f]+\)", re.M)
_ALLOCATOR = re.compile(r"^(malloc|calloc|realloc|free|posix_memalign|aligned_alloc|memalign|valloc|pvalloc|_Zn[wa]\w*)$")
# The OpenMP allocation API a kernel may call itself: memory from it is the kernel's, not the runtime's.
_USER_OMP_ALLOC = re.compile(r"^(omp_(aligned_)?(alloc|calloc|realloc)|__kmpc_(aligned_)?(alloc|calloc|realloc))$")
# Where the sanitizer crashed, by the OpenMP entry point on the crash stack (clang 14's Archer).
_CRASH_CONSTRUCT = {"__kmpc_fork_teams": "`teams`", "__kmpc_push_num_teams": "`teams`",
                    "__kmpc_omp_wait_deps": "`taskwait depend`", "__kmpc_omp_task_with_deps": "task `depend`",
                    "__kmpc_omp_taskwait_deps": "`taskwait depend`"}


def uses_openmp(nm_output: str) -> bool:
    """Does the kernel object (`nm -P kernel.o`) call the OpenMP runtime?"""
    return bool(_OPENMP_SYMBOL.search(nm_output))


def runtime_memory(report: str) -> bool:
    """Is a race report's location a heap block the OpenMP runtime allocated for itself? (The first
    frame of the block's allocation stack past the allocator is in libomp, and the kernel did not ask
    for it through omp_alloc and the like.)"""
    start = report.find("Location is heap block")
    if start < 0:
        return False
    stack = report[start:].split("\n\n", 1)[0]
    for name, module in _FRAME.findall(stack):
        if _USER_OMP_ALLOC.match(name):
            return False
        if _ALLOCATOR.match(name):
            continue
        return Path(module).name.startswith("libomp")
    return False


@dataclass
class Judgement:
    """One sanitizer run's output, read whole."""

    races: list[str] = field(default_factory=list)  # race reports that count
    runtime: list[str] = field(default_factory=list)  # race reports on the OpenMP runtime's own memory
    crash: str = ""  # the sanitizer's fatal error and where, when it died


def judge(stderr: str) -> Judgement:
    j = Judgement()
    for block in stderr.split("==================\n"):
        if RACE_MARK in block:
            block = block.split("\nThreadSanitizer: reported", 1)[0].strip()
            (j.runtime if runtime_memory(block) else j.races).append(block)
    m = re.search(r"^.*(ERROR|FATAL): ThreadSanitizer: .*$", stderr, re.M)
    if m and "unexpected memory mapping" in m.group(0):
        j.crash = ("ThreadSanitizer (clang 14) cannot run under this kernel's address-space randomization "
                   "(lower vm.mmap_rnd_bits to 28, or set eval.race_compiler to a newer clang)")
    elif m:
        names = [name for name, _ in _FRAME.findall(stderr[m.start():])]
        construct = next((_CRASH_CONSTRUCT[n] for n in names if n in _CRASH_CONSTRUCT), "")
        what = m.group(0).split("ThreadSanitizer: ", 1)[1].split(" on ")[0].split(" (")[0].strip()
        where = next((n for n in names if n != "<null>"), "")
        j.crash = (f"ThreadSanitizer's OpenMP support (clang 14) crashes on {construct} ({what} in {where})" if construct
                   else f"ThreadSanitizer crashed ({what}" + (f" in {where})" if where else ")"))
    return j


def _location(report: str) -> str:
    m = re.search(r"^SUMMARY: ThreadSanitizer: data race (\S+)(.*)$", report, re.M)
    if not m:
        return ""
    return f"{Path(m.group(1)).name}{m.group(2)}"


def _build_failure(stderr: str, compiler: str) -> str:
    """Why the sanitizer build failed, and the fix, in one line."""
    if "libclang_rt.tsan" in stderr:
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


def preprocess(ev: CFamilyEvaluator, candidate: Candidate) -> str:
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
            shutil.rmtree(d, ignore_errors=True)
    # What macros built out of pieces (## pasting) the text gate could not read: inline assembly the
    # sanitizer does not instrument, attributes that turn it off.
    # (the #line lines are restore_includes' own: a kernel's own are refused before it is built)
    why = check_text(re.sub(r"(?m)^#line .*$", "", source))
    if why:
        raise Unavailable(f"the kernel as {task.compiler} preprocesses it is refused: {why}")
    return source


def sanitizer_flags(ev: CFamilyEvaluator, candidate: Candidate) -> list[str]:
    """The production build's flags that change the preprocessed text, for the sanitizer build."""
    return [f for f in [*ev.task.build.cflags, *candidate.cflags] if _MACRO_FLAG.fullmatch(f)] + list(candidate.define_flags)


class Unavailable(Exception):
    """The sanitizer build could not be made: the message is why, and the fix."""


@contextlib.contextmanager
def sanitizer_binary(ev: CFamilyEvaluator, candidate: Candidate, opt: str, source: str) -> Iterator[Path]:
    """Build `source` (the candidate's kernel as preprocess() returned it) with ThreadSanitizer at `opt`
    in one sandboxed step; yields the binary (in a directory removed afterwards). Raises Unavailable."""
    cfg = ev.config
    d = ev.new_dir("race")
    b_dir: Path | None = None
    try:
        harness = ev.stage_trusted_sources(d)
        (d / "kernel.c").write_text(source)
        flags = [cfg.race_compiler, "-fopenmp", "-fsanitize=thread", "-g", *sanitizer_flags(ev, candidate), opt]
        compile_ = [*flags, "-c", "kernel.c", "-o", "kernel.o"]
        # KO_NO_SECCOMP: the sanitizer's runtime makes system calls the measured program's filter refuses.
        link = [*flags, "-I.", "-DKO_NO_SECCOMP", "driver.c", harness, "kernel.o", "-lm", "-o", "race"]
        r = ev.run_step(["sh", "-c", f"{shlex.join(compile_)} && {shlex.join(link)}"], d, cfg.build_timeout_s)
        if not r.ok:
            raise Unavailable(f"{_build_failure(r.stderr, cfg.race_compiler)}\n{tail(r.stderr, 15)}")
        b_dir = ev.new_dir("race-bin")
        shutil.copy(d / "race", b_dir / "race")
        if not cfg.keep_workdirs:
            shutil.rmtree(d, ignore_errors=True)
        yield b_dir / "race"
    finally:
        if not cfg.keep_workdirs:
            shutil.rmtree(d, ignore_errors=True)
        if b_dir is not None:
            shutil.rmtree(b_dir, ignore_errors=True)


def sanitizer_run(ev: CFamilyEvaluator, exe: Path, threads: int, seeds: list[int]) -> tuple[Judgement, str]:
    """Run a sanitizer binary once at the task's race size; returns the judgement and, when the run
    failed without a race report, why."""
    cfg = ev.config
    run, rd, r = ev.run_driver(Binary(exe, threads, 1, None), [ev.task.sizes.race], seeds, False,
                               cfg.verify_timeout_s * 2, extra_env=RACE_ENV, memory_mb=None)
    shutil.rmtree(rd, ignore_errors=True)
    j = judge(r.stderr)
    if j.races:
        return j, ""
    if j.crash:
        return j, j.crash
    if r.timed_out:
        return j, "the sanitizer run timed out"
    if not (run.complete and r.ok):
        return j, f"the sanitizer run failed without a race report: {run.error or tail(r.stderr, 1)[:200] or r.returncode}"
    return j, ""


def race_plan(ev: CFamilyEvaluator, candidate: Candidate) -> list[tuple[str, list[int]]]:
    """(optimization level, thread counts) of the sanitizer runs: the configured ones, and the -O1 build
    also at the thread count the candidate is timed at (a kernel must not race only where it is timed)."""
    timed = candidate.threads or ev.task.timing.threads
    o1 = sorted(set(ev.config.race_threads) | {timed}) if ev.config.race_threads else []
    return [(opt, threads) for opt, threads in (("-O1", o1), ("-O0", list(ev.config.race_threads_o0))) if threads]


def check(ev: CFamilyEvaluator, candidate: Candidate, nm_output: str) -> tuple[Verdict, str]:
    """Race-check the candidate whose production object `nm -P` listed as `nm_output`. Returns (verdict, detail):
    the detail's first line is the reason (for `unavailable`: what to do about it)."""
    task, cfg = ev.task, ev.config
    if not uses_openmp(nm_output):
        return "skipped", "the kernel object makes no OpenMP runtime calls"
    if task.uses_mpi or task.uses_gpu:
        return "unavailable", f"the race check does not run {task.target} programs"
    if ev.sandbox.name == "local" and shutil.which(cfg.race_compiler) is None:  # the sandbox image has clang
        return "unavailable", f"{cfg.race_compiler} not found ({FIX['clang']})"
    plan = race_plan(ev, candidate)
    problems: list[str] = []
    not_counted = 0
    seeds = [secrets.randbits(62), secrets.randbits(62)]
    ev.phase("race check: building with ThreadSanitizer")
    try:
        source = preprocess(ev, candidate)
    except Unavailable as e:
        return "unavailable", str(e)
    for opt, threads in plan:
        try:
            with sanitizer_binary(ev, candidate, opt, source) as exe:
                for t in threads:
                    ev.phase(f"race check: ThreadSanitizer ({opt}) at n={task.sizes.race} on {t} threads")
                    j, problem = sanitizer_run(ev, exe, t, seeds)
                    not_counted += len(j.runtime)
                    if j.races:
                        first = j.races[0]
                        more = f"; {len(j.races) - 1} more in this run" if len(j.races) > 1 else ""
                        return "race", (f"ThreadSanitizer reported a data race at {t} threads ({opt}): {_location(first)}\n"
                                        f"{first[:6000]}\n({len(j.races)} report(s){more})")
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
    return "clean", f"no race reported at {runs}{note}"
