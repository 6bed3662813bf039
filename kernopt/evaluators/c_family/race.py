"""The OpenMP race check: clang ThreadSanitizer with the LLVM OpenMP runtime (Archer).

Judged by the report text, not the exit code: the tool also crashes on some constructs with the
exit code it uses for races, and a crash is "race check unavailable", not "race". One run misses
races that do not occur in its schedule, so the kernel is built at -O1 and -O0 and run at several
thread counts with a longer access history.
"""

from __future__ import annotations

import secrets
import shlex
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from kernopt.candidate import Candidate
from kernopt.evaluators.base import Binary
from kernopt.evaluators.c_family.static_gate import strip_comments_and_strings

if TYPE_CHECKING:
    from kernopt.evaluators.c_family.evaluator import CFamilyEvaluator

RACE_MARK = "WARNING: ThreadSanitizer: data race"
TSAN_OPTIONS = "history_size=7 ignore_noninstrumented_modules=1 halt_on_error=0 exitcode=66 report_signal_unsafe=0"
Verdict = Literal["clean", "race", "unavailable", "skipped"]


def _excerpt(stderr: str) -> str:
    start = stderr.find(RACE_MARK)
    lines = stderr[start:].splitlines()
    return "\n".join(lines[:14])


def check(ev: CFamilyEvaluator, candidate: Candidate) -> tuple[Verdict, str]:
    """Build the candidate under ThreadSanitizer and run it at a small size. Returns (verdict, detail)."""
    task = ev.task
    code = strip_comments_and_strings(candidate.files[task.kernel])
    if "omp" not in code:
        return "skipped", "no OpenMP constructs in the kernel"
    if task.uses_mpi:
        return "unavailable", "race check is not run for mpi+openmp targets"
    if ev.sandbox.name == "local" and shutil.which("clang") is None:  # the sandbox image has clang
        return "unavailable", "clang not installed (apt-get install clang libomp-dev)"
    d = ev.new_dir("race")
    try:
        harness = ev.stage_trusted_sources(d)
        (d / "kernel.c").write_text(candidate.files[task.kernel])
        notes: list[str] = []
        seeds = [secrets.randbits(62), secrets.randbits(62)]
        for opt, threads in (("-O1", ev.config.race_threads), ("-O0", ev.config.race_threads_o0)):
            if not threads:
                continue
            flags = ["clang", "-fopenmp", "-fsanitize=thread", "-g", opt, *candidate.define_flags]
            exe = f"race{opt}"
            compile_ = [*flags, "-c", "kernel.c", "-o", "kernel.o"]
            link = [*flags, "-I.", "-DKO_NO_SECCOMP", "driver.c", harness, "kernel.o", "-lm", "-o", exe]
            r = ev.run_step(["sh", "-c", f"{shlex.join(compile_)} && {shlex.join(link)}"], d, ev.config.build_timeout_s)
            if not r.ok:
                return "unavailable", f"ThreadSanitizer build failed: {r.stderr.strip().splitlines()[-1:] or r.stderr}"
            b_path = ev.new_dir("race-bin") / exe
            shutil.copy(d / exe, b_path)
            try:
                for t in threads:
                    run, rd, r = ev.run_driver(Binary(b_path, t, 1, None), [task.sizes.race], seeds, False,
                                               ev.config.verify_timeout_s * 2, extra_env={"TSAN_OPTIONS": TSAN_OPTIONS},
                                               memory_mb=None)
                    shutil.rmtree(rd, ignore_errors=True)
                    if RACE_MARK in r.stderr:
                        return "race", f"ThreadSanitizer reported a data race at {t} threads ({opt})\n{_excerpt(r.stderr)}"
                    if not (r.ok and run.complete):
                        notes.append(f"{opt} at {t} threads: run failed without a race report ({r.returncode})")
            finally:
                shutil.rmtree(Path(b_path).parent, ignore_errors=True)
        if notes:
            return "unavailable", "; ".join(notes)
        return "clean", f"no race reported at -O1 {ev.config.race_threads} and -O0 {ev.config.race_threads_o0} threads"
    finally:
        if not ev.config.keep_workdirs:
            shutil.rmtree(d, ignore_errors=True)
