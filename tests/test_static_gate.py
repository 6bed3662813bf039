"""The static gate: the source text check (comments and strings ignored, flags and defines validated)
and the object check, fed with real `nm -P` / `readelf -SW` / `objdump -d` output of objects
compiled here."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kernopt.candidate import Candidate
from kernopt.evaluators.c_family.static_gate import (
    MAX_SOURCE_BYTES,
    allowed_symbol,
    check_object,
    check_source,
    strip_comments_and_strings,
)
from kernopt.task import Task, load_task

HACKS = Path(__file__).resolve().parent / "hacks"
DATA = Path(__file__).resolve().parent / "data"
BASELINE = (DATA / "small_gemm" / "kernel.c").read_text()
SIG = "void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c)"


@pytest.fixture(scope="module")
def task() -> Task:
    return load_task(DATA / "small_gemm")


def fast_math_task(task: Task) -> Task:
    return task.model_copy(update={"verify": task.verify.model_copy(update={"allow_fast_math": True})})


def src_check(task: Task, source: str, **knobs: object) -> str | None:
    return check_source(task, Candidate(files={task.kernel: source}, **knobs))  # type: ignore[arg-type]


def kernel(body: str, prelude: str = "") -> str:
    return f"{prelude}\n{SIG} {{\n{body}\n}}\n"


# ---------------------------------------------------------------- strip_comments_and_strings
def test_strip_removes_comments_and_keeps_lines() -> None:
    src = "int a; // printf(x)\n/* exit(1);\n system(\"x\") */ int b;\nint c;"
    out = strip_comments_and_strings(src)
    assert "printf" not in out and "exit" not in out and "system" not in out
    assert "int a;" in out and "int b;" in out and "int c;" in out
    assert out.count("\n") == src.count("\n")


def test_strip_empties_string_and_char_literals() -> None:
    src = 'const char *s = "printf(\\"%d\\", fopen(x))"; char q = \'"\'; char e = \'\\\'\'; int after;'
    out = strip_comments_and_strings(src)
    assert "printf" not in out and "fopen" not in out
    assert out.count('""') == 1 and out.count("''") == 2 and "int after;" in out


def test_strip_comment_markers_inside_strings_are_not_comments() -> None:
    out = strip_comments_and_strings('const char *u = "http://x"; int keep; /* "*/ int also;')
    assert "int keep;" in out and "int also;" in out


def test_strip_unterminated_comment() -> None:
    assert "exit" not in strip_comments_and_strings("int a; /* exit(0);")


# ---------------------------------------------------------------- check_source
def test_baseline_passes(task: Task) -> None:
    assert src_check(task, BASELINE) is None


@pytest.mark.parametrize("source", [
    kernel("    // printf(\"debug\"); exit(1); system(\"rm -rf /\");\n" + BASELINE.split("{", 1)[1].rsplit("}", 1)[0]),
    kernel("    /* kill(getppid(), 9); __asm__(\"syscall\"); LD_PRELOAD */\n    (void)n; (void)a; (void)b; (void)c;"),
    kernel('    const char *msg = "printf(x); fopen(y); pthread_create(); asm"; (void)msg; (void)n; (void)a; (void)b; (void)c;'),
    kernel("    long my_printf = 0, exit_code = 0, system_time = 0; (void)my_printf; (void)exit_code; (void)system_time;"
           "\n    (void)n; (void)a; (void)b; (void)c;"),
    kernel("    (void)n; (void)a; (void)b; (void)c;", "#include <math.h>\n#include <omp.h>\n#include <string.h>\n"
           "#include <stdlib.h>\n#  include <immintrin.h>\n#include <sys/types.h>"),
    kernel("    (void)n; (void)a; (void)b; (void)c;", "static double buf[64] __attribute__((aligned(64)));\n"
           "__attribute__((noinline)) static void helper(void) {}"),
], ids=["comment", "block_comment", "string", "similar_names", "system_includes", "harmless_attributes"])
def test_harmless_source_passes(task: Task, source: str) -> None:
    assert src_check(task, source) is None


@pytest.mark.parametrize("call", ["printf", "puts", "exit", "_exit", "abort", "system", "popen", "fork", "execve",
                                  "pthread_create", "kill", "raise", "signal", "fopen", "open", "dlopen", "dlsym",
                                  "syscall", "clock_gettime", "gettimeofday", "omp_get_wtime", "MPI_Wtime", "setenv",
                                  "ptrace", "longjmp"])
def test_forbidden_calls(task: Task, call: str) -> None:
    why = src_check(task, kernel(f"    {call} (0);"))
    assert why is not None and f"calls {call}()" in why


def test_forbidden_function_definition(task: Task) -> None:
    why = src_check(task, "double omp_get_wtime(void) { return 0.0; }\n" + BASELINE)
    assert why is not None and "omp_get_wtime" in why


@pytest.mark.parametrize("word", ["asm", "__asm__", "__asm", "LD_PRELOAD", "__builtin_trap"])
def test_forbidden_words(task: Task, word: str) -> None:
    why = src_check(task, kernel(f"    {word};"))
    assert why is not None and f"uses {word}" in why


@pytest.mark.parametrize("attr", ["constructor", "destructor", "constructor(101)", 'alias("gemm")', "weak",
                                  'weakref("x")', 'ifunc("r")', 'section(".init_array")', 'symver("x@V1")'])
def test_forbidden_attributes(task: Task, attr: str) -> None:
    why = src_check(task, f"static void f(void) __attribute__(( used, {attr} ));\n" + BASELINE)
    assert why is not None and "__attribute__((" in why and attr.split("(")[0] in why


@pytest.mark.parametrize("decl", [
    'static void f(void) __attribute__((__weakref__("GO" "MP_parallel_start")));',  # underscores around the word
    'static void f(void) __attribute((weakref("x")));',  # the other spelling
    'static void f(void) __attribute__ ( (weakref("x")) );',  # spaces between the parentheses
    'static void f(void) __attribute__((aligned((((16)))), weakref("x")));',  # nested deeper than a regex reads
    '[[gnu::constructor]] static void f(void) {}',  # C2x attribute syntax
    'static int f(void) __attribute__((__optimize__("fast-math")));',
])
def test_forbidden_attributes_in_any_spelling(task: Task, decl: str) -> None:
    """Found by a red team (2026-11-25): each of these got a forbidden attribute past the old pattern."""
    why = src_check(task, decl + "\n" + BASELINE)
    assert why is not None and "is not allowed" in why, why


@pytest.mark.parametrize("text, word", [
    ('#line 1 "hidden.c"', "#line"),  # renames the lines after it: the race check's preprocessing drops them
    ('# 1 "hidden.c"', "line markers"),
    ('#if __has_include("driver.o")\n#endif', "__has_include"),  # true in the build directory, not in the race check's
    ("#if __has_include_next(<math.h>)\n#endif", "__has_include_next"),
    ("#pragma clang fp reassociate(on)", "floating-point"),
    ("#pragma clang attribute push (__attribute__((no_sanitize(\"thread\"))), apply_to = function)", "attributes"),
    ("#pragma float_control(precise, off)", "floating-point"),
])
def test_preprocessor_lines_that_make_the_race_check_see_other_code(task: Task, text: str, word: str) -> None:
    why = src_check(task, text + "\n" + BASELINE)
    assert why is not None and word in why, why


@pytest.mark.parametrize("pragma", ["#pragma weak gemm", "#pragma redefine_extname gemm other",
                                    '_Pragma("GCC optimize(3)")'])
def test_forbidden_pragmas(task: Task, pragma: str) -> None:
    assert src_check(task, pragma + "\n" + BASELINE) is not None


@pytest.mark.parametrize("directive", ['#include "../harness.c"', '#include "kernopt.h"', '#include "/etc/passwd"',
                                       "#include </etc/passwd>", "#include <../../etc/passwd>",
                                       "#include <sys/../../../etc/passwd>", "#define F <stdio.h>\n#include F",
                                       "#include_next <stdio.h>", "  #  include \"x.h\""])
def test_includes_other_than_system_headers_rejected(task: Task, directive: str) -> None:
    why = src_check(task, directive + "\n" + BASELINE)
    assert why is not None and "#include" in why


@pytest.mark.parametrize("directive", ['#import "/etc/hostname"', '%:include "/etc/hostname"',
                                       '#\\\ninclude "/etc/hostname"'], ids=["import", "digraph", "line_splice"])
def test_include_spellings_rejected(task: Task, directive: str) -> None:
    assert src_check(task, directive + "\n" + BASELINE) is not None


def test_line_splice_does_not_hide_calls(task: Task) -> None:
    assert src_check(task, kernel('    sys\\\ntem("true");')) is not None


def test_attribute_check_is_bounded_to_the_attribute(task: Task) -> None:
    src = kernel("    long section = n / 2, alias = 0;\n    for (long i = 0; i < n * n; i++) c[i] = a[i] * b[i] "
                 "+ buf[0] * (double)(section + alias);", "static double buf[8] __attribute__((aligned(64)));")
    assert src_check(task, src) is None


def test_size_limit(task: Task) -> None:
    big = BASELINE + "\n" + "// padding\n" * (MAX_SOURCE_BYTES // 10)
    why = src_check(task, big)
    assert why is not None and "larger than" in why


def test_candidate_must_provide_the_kernel_and_only_it(task: Task) -> None:
    assert "has no kernel.c" in (check_source(task, Candidate(files={})) or "")
    why = check_source(task, Candidate(files={"kernel.c": BASELINE, "harness.c": ""}))
    assert why is not None and "not editable" in why
    why = check_source(task, Candidate(files={"kernel.c": BASELINE, "../kernopt.h": ""}))
    assert why is not None and "not editable" in why


# ---------------------------------------------------------------- flags and defines
@pytest.mark.parametrize("flags", [["-O2"], ["-O3"], ["-Os"], ["-march=native"], ["-mtune=native"], ["-funroll-loops"],
                                   ["-ftree-vectorize", "-fno-trapping-math"], ["-mavx2", "-mfma"], ["-fopenmp-simd"],
                                   ["-ffp-contract=off"], ["-fprefetch-loop-arrays"]])
def test_allowed_flags(task: Task, flags: list[str]) -> None:
    assert src_check(task, BASELINE, cflags=flags) is None


@pytest.mark.parametrize("flag", ["-ffast-math", "-funsafe-math-optimizations", "-ffinite-math-only",
                                  "-fassociative-math", "-Ofast"])
def test_fast_math_rejected_unless_task_allows(task: Task, flag: str) -> None:
    why = src_check(task, BASELINE, cflags=[flag])
    assert why is not None and flag in why
    if flag != "-Ofast":  # -Ofast is not an -O[0-3s] flag: rejected either way
        assert src_check(fast_math_task(task), BASELINE, cflags=[flag]) is None


@pytest.mark.parametrize("flag", ["-I/etc", "-I.", "-include", "/etc/passwd", "-DX=1", "-Wl,--wrap=clock_gettime",
                                  "-L/tmp", "-lfoo", "-B/tmp", "-o", "-fprofile-dir=/tmp", "-E", "-S", "-save-temps",
                                  "-specs=x", "--param=x", "-x", "-fdump-rtl-all=/tmp/x", "-march=skylake;rm",
                                  "-O3 -I/etc", "-O4", ""])
def test_other_flags_rejected(task: Task, flag: str) -> None:
    why = src_check(task, BASELINE, cflags=[flag])
    assert why is not None and "not allowed" in why


@pytest.mark.parametrize("flag", ["-fplugin=x", "-flto", "-flto=auto", "-fuse-linker-plugin", "-fwhole-program"])
def test_plugin_and_lto_flags_rejected(task: Task, flag: str) -> None:
    assert src_check(task, BASELINE, cflags=[flag]) is not None


@pytest.mark.parametrize("defines", [{"BS": "64"}, {"TILE_I": "32", "UNROLL": "4"}, {"SCALE": "1.5e-3"}, {"NEG": "-1"},
                                     {"FLAG": ""}, {"_X": "a_b"}])
def test_valid_defines(task: Task, defines: dict[str, str]) -> None:
    assert src_check(task, BASELINE, defines=defines) is None


@pytest.mark.parametrize("defines", [{"BS": "64 -I/etc"}, {"BS": "1;system"}, {"BS": "f(x)"}, {"BS": '"s"'},
                                     {"1BS": "1"}, {"B S": "1"}, {"BS=1 -DX": "2"}, {"BS": "$(id)"}, {"": "1"},
                                     {"BS": "1\n#include </etc/passwd>"}])
def test_invalid_defines(task: Task, defines: dict[str, str]) -> None:
    why = src_check(task, BASELINE, defines=defines)
    assert why is not None and "not a plain identifier" in why


# ---------------------------------------------------------------- check_object on real objects
needs_binutils = pytest.mark.skipif(any(shutil.which(t) is None for t in ("gcc", "nm", "readelf", "objdump")),
                                    reason="needs gcc and binutils")


def inspect(tmp_path: Path, source: str, flags: tuple[str, ...] = ("-O2", "-fopenmp"), cc: str = "gcc") -> tuple[str, str, str]:
    src = tmp_path / "kernel.c"
    src.write_text(source)
    subprocess.run([cc, *flags, "-c", str(src), "-o", str(tmp_path / "kernel.o")], check=True, capture_output=True)
    return tuple(subprocess.run([*cmd, str(tmp_path / "kernel.o")], check=True, capture_output=True, text=True).stdout
                 for cmd in (["nm", "-P"], ["readelf", "-SW"], ["objdump", "-d"]))  # type: ignore[return-value]


PARALLEL = kernel("""#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++) {
            double s = 0.0;
            for (long k = 0; k < n; k++) s += a[i * n + k] * b[k * n + j];
            c[i * n + j] = s;
        }""")
NAMED_CRITICAL = kernel("""#pragma omp parallel for
    for (long i = 0; i < n * n; i++) {
        double v = a[i] + b[i];
#pragma omp critical(acc)
        c[i] = v;
    }""")
LIBS = kernel("""    double *t = malloc((size_t)(n * n) * sizeof *t);
    memset(t, 0, (size_t)(n * n) * sizeof *t);
    for (long i = 0; i < n * n; i++) t[i] = helper(a[i]) + sqrt(fabs(b[i])) + exp(-fabs(a[i])) + omp_get_num_threads();
    memcpy(c, t, (size_t)(n * n) * sizeof *t);
    free(t);""", "#include <math.h>\n#include <omp.h>\n#include <stdlib.h>\n#include <string.h>\n"
                 "static double helper(double x) { return x * x; }\nstatic double table[16];")


@needs_binutils
@pytest.mark.parametrize("source", [BASELINE, PARALLEL, LIBS, NAMED_CRITICAL], ids=["baseline", "openmp", "libc_libm_static", "named_critical"])
def test_clean_objects_pass(task: Task, tmp_path: Path, source: str) -> None:
    assert check_object(task, *inspect(tmp_path, source)) is None


@needs_binutils
def test_clean_object_passes_at_every_level(task: Task, tmp_path: Path) -> None:
    for flags in (("-O0",), ("-O1", "-fopenmp"), ("-O3", "-march=native", "-fopenmp"), ("-O2", "-fstack-protector-all")):
        assert check_object(task, *inspect(tmp_path, PARALLEL, flags)) is None, flags


@needs_binutils
def test_libgcc_integer_helpers_pass(task: Task, tmp_path: Path) -> None:
    """128-bit division is a call to libgcc (__divmodti4 or __divti3): gcc's graphite emits one for a loop bound, and
    a candidate may write one; pure arithmetic, so the object gate admits it (and still nothing else: printf)."""
    wide = kernel("""    __int128 q = (__int128)n * 1000000007 / (n + 3), r = (__int128)n * 1000000007 % (n + 3);
    c[0] = (double)q + (double)r; (void)a; (void)b;""")
    outs = inspect(tmp_path, wide)
    assert re.search(r"__(div|mod|divmod)ti[34]", outs[0]), outs[0]
    assert check_object(task, *outs) is None
    assert allowed_symbol("__divmodti4") and allowed_symbol("__udivti3") and not allowed_symbol("__divmodti5")
    assert not allowed_symbol("__printf_chk")


BAD_OBJECTS = {
    "printf": ("#include <stdio.h>\n", '    printf("%ld", n);', "kernel references printf"),
    "harness": ("extern void ko_fill(long, unsigned long);\n", "    ko_fill(n, 1);", "kernel references ko_fill"),
    "omp_get_wtime": ("#include <omp.h>\n", "    c[0] = omp_get_wtime();", "kernel references omp_get_wtime"),
    "getenv": ("#include <stdlib.h>\n", '    c[0] = getenv("X") != 0;', "kernel references getenv"),
    "mmap": ("#include <sys/mman.h>\n", "    c[0] = mmap(0, 4096, 7, 0x22, -1, 0) != 0;", "kernel references mmap"),
    "extra_function": ("void helper(void) {}\n", "    helper();", "defines global symbol helper"),
    "global_variable": ("double scratch[16];\n", "    c[0] = scratch[n];", "defines global symbol scratch"),
    "ko_fill_defined": ("void ko_fill(long n, unsigned long s) { (void)n; (void)s; }\n", "", "defines global symbol ko_fill"),
    "clock_gettime_defined": ("#include <time.h>\nint clock_gettime(clockid_t k, struct timespec *t) "
                              "{ (void)k; t->tv_sec = 0; t->tv_nsec = 0; return 0; }\n", "",
                              "defines global symbol clock_gettime"),
    "weak_definition": ("__attribute__((weak)) void ko_fill(long n, unsigned long s) { (void)n; (void)s; }\n", "",
                        "weak symbol ko_fill"),
    # (gcc drops empty constructors: these ones store to a volatile)
    "constructor": ("static volatile int v;\n__attribute__((constructor)) static void f(void) { v = 1; }\n", "",
                    "static constructors"),
    "constructor_priority": ("static volatile int v;\n__attribute__((constructor(101))) static void f(void) { v = 1; }\n",
                             "", "static constructors"),
    "destructor": ("static volatile int v;\n__attribute__((destructor)) static void f(void) { v = 1; }\n", "",
                   "static constructors"),
    "init_array_section": ("static void f(void) {}\n__attribute__((section(\".init_array\"), used)) "
                           "static void (*p)(void) = f;\n", "", "static constructors"),
    "preinit_array": ("static void f(void) {}\n__attribute__((section(\".preinit_array\"), used)) "
                      "static void (*p)(void) = f;\n", "", "static constructors"),
    "syscall": ("", '    long r; __asm__ volatile("syscall" : "=a"(r) : "a"(39L) : "rcx", "r11", "memory"); (void)r;',
                "raw syscall instruction"),
    "int80": ("", '    long r; __asm__ volatile("int $0x80" : "=a"(r) : "a"(20L) : "memory"); (void)r;', "raw int"),
    "sysenter": ("", '    if (n < 0) __asm__ volatile("sysenter");', "raw sysenter"),
    "no_kernel": ("static void gemm_impl(void) {}\n", "", "does not define gemm"),
}


@needs_binutils
@pytest.mark.parametrize("case", list(BAD_OBJECTS), ids=list(BAD_OBJECTS))
def test_bad_objects_rejected(task: Task, tmp_path: Path, case: str) -> None:
    prelude, body, why = BAD_OBJECTS[case]
    source = prelude if case == "no_kernel" else kernel(body + "\n    (void)n; (void)a; (void)b; (void)c;", prelude)
    got = check_object(task, *inspect(tmp_path, source))
    assert got is not None and why in got, got


@needs_binutils
def test_common_symbol_rejected(task: Task, tmp_path: Path) -> None:
    outs = inspect(tmp_path, kernel("    c[0] = scratch;", "double scratch;"), ("-O2", "-fcommon"))
    assert " C " in outs[0]
    why = check_object(task, *outs)
    assert why is not None and "scratch" in why


@needs_binutils
def test_ifunc_definition_rejected(task: Task, tmp_path: Path) -> None:
    outs = inspect(tmp_path, (HACKS / "xf_ifunc_clock_gettime.c").read_text())
    assert "clock_gettime i " in outs[0]
    assert check_object(task, *outs) is not None


@needs_binutils
@pytest.mark.parametrize("name", ["h13c_constructor_pasted.c", "x_inline_asm_pasted.c"])
def test_lto_object_rejected(task: Task, tmp_path: Path, name: str) -> None:
    outs = inspect(tmp_path, (HACKS / name).read_text(), ("-O2", "-fopenmp", "-flto"))
    assert check_object(task, *outs) is not None


@needs_binutils
@pytest.mark.parametrize("name,why", [("h13c_constructor_pasted.c", "static constructors"),
                                      ("x_inline_asm_pasted.c", "raw syscall"),
                                      ("h11b_clock_gettime_pasted.c", "defines global symbol clock_gettime"),
                                      ("h12_background_thread_pasted.c", "references pthread_create"),
                                      ("h13d_constructor_exit_pasted.c", "kernel references")])
def test_object_gate_catches_what_pasting_hides_from_the_text_gate(task: Task, tmp_path: Path, name: str, why: str) -> None:
    source = (HACKS / name).read_text()
    assert src_check(task, source) is None  # the text gate is fooled ...
    got = check_object(task, *inspect(tmp_path, source))
    assert got is not None and why in got  # ... the object gate is not


# MPI: real objects when mpicc is installed (symbols from Open MPI's mpi.h).
DOT_SIG = "void dot(long n, const double *restrict x, const double *restrict y, double *restrict result)"


@needs_binutils
@pytest.mark.skipif(shutil.which("mpicc") is None, reason="needs mpicc")
@pytest.mark.parametrize("body,why", [
    ("    double s = 0.0; for (long i = 0; i < n; i++) s += x[i] * y[i];\n"
     "    MPI_Allreduce(MPI_IN_PLACE, &s, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); *result = s;", None),
    ("    *result = MPI_Wtime() + 0.0 * (double)(n + (long)x + (long)y);", "kernel references MPI_Wtime"),
])
def test_mpi_objects(task: Task, tmp_path: Path, body: str, why: str | None) -> None:
    mpi_task = task.model_copy(update={"target": "mpi", "functions": ["dot"], "signature": DOT_SIG})
    outs = inspect(tmp_path, f"#include <mpi.h>\n{DOT_SIG} {{\n{body}\n}}\n", ("-O2",), cc="mpicc")
    got = check_object(mpi_task, *outs)
    assert got == why if why is None else (got is not None and why in got), got


@needs_binutils
@pytest.mark.skipif(shutil.which("clang") is None, reason="needs clang")
def test_pollys_split_region_calls_pass_only_for_a_trusted_build(task: Task, tmp_path: Path) -> None:
    """clang Polly parallelizes the baseline with GOMP_parallel_loop_runtime_start / GOMP_parallel_end, which the
    gate refuses in candidates (a team left running after the kernel returns): the peers bench builds the task's
    own source with Polly as a trusted toolchain, so there they pass; a candidate's object never does."""
    flags = ("-O3", "-mllvm", "-polly", "-mllvm", "-polly-parallel", "-fopenmp")
    probe = subprocess.run(["clang", *flags, "-x", "c", "-c", "/dev/null", "-o", str(tmp_path / "probe.o")], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("this clang has no Polly")
    objs = inspect(tmp_path, BASELINE, flags, cc="clang")
    if "GOMP_parallel_end" not in objs[0]:
        pytest.skip("Polly did not parallelize the baseline here")
    assert "GOMP_parallel_end" in (check_object(task, *objs) or "")
    assert check_object(task, *objs, trusted_build=True) is None
