"""The static gate: reject candidates that try to reach outside their kernel, before and after compiling.

Two layers. The source gate reads the text (comments and strings removed) for things a kernel has
no business doing: inline assembly, includes of files, constructors, symbol aliasing, process and
file control. The object gate is the authority: after compiling, the kernel object may define only
the task's kernel functions and may reference only an allow-list of math, memory, OpenMP and MPI
symbols, and may not carry constructors or raw system-call instructions. Macro tricks that fool the
text gate still have to get past the object gate. CUDA kernels (cuda-c) have rules of their own for
nvcc's flags and generated machinery: kernopt/evaluators/c_family/cuda_gate.py.
"""

from __future__ import annotations

import re

from kernopt.candidate import Candidate
from kernopt.evaluators.c_family import cuda_gate
from kernopt.task import Task

MAX_SOURCE_BYTES = 256 * 1024

_FORBIDDEN_CALLS = {
    "syscall": "raw system calls",
    "dlopen": "dynamic loading",
    "dlsym": "symbol lookup (timer interception)",
    "fork": "process creation",
    "vfork": "process creation",
    "clone": "process creation",
    "execve": "process creation",
    "execv": "process creation",
    "execvp": "process creation",
    "execl": "process creation",
    "execlp": "process creation",
    "system": "running commands",
    "popen": "running commands",
    "pthread_create": "background threads (only OpenMP threads are allowed)",
    "thrd_create": "background threads (only OpenMP threads are allowed)",
    "kill": "signalling processes",
    "raise": "signalling processes",
    "abort": "killing the harness",
    "exit": "exiting the harness",
    "_exit": "exiting the harness",
    "_Exit": "exiting the harness",
    "quick_exit": "exiting the harness",
    "signal": "signal handlers",
    "sigaction": "signal handlers",
    "setjmp": "non-local jumps",
    "longjmp": "non-local jumps",
    "ptrace": "tracing processes",
    "fopen": "file access",
    "open": "file access",
    "printf": "printing (results come from the harness only)",
    "puts": "printing (results come from the harness only)",
    "clock_gettime": "timer access",
    "gettimeofday": "timer access",
    "omp_get_wtime": "timer access",
    "MPI_Wtime": "timer access",
    "setenv": "changing the environment",
    "putenv": "changing the environment",
}
_FORBIDDEN_WORDS = {
    "asm": "inline assembly",
    "__asm__": "inline assembly",
    "__asm": "inline assembly",
    "LD_PRELOAD": "LD_PRELOAD",
    "__builtin_trap": "killing the harness",
    # The race check builds the kernel again (clang, -O0/-O1, ThreadSanitizer, at another time): nothing may
    # switch the sanitizer off for the kernel, or take another path in that build than in the production one.
    "__builtin_constant_p": "an optimization-level-dependent test (the race check builds at -O0 and -O1)",
    "__has_include": "a test of which files exist (the race check preprocesses the kernel in another directory)",
    "__has_include_next": "a test of which files exist (the race check preprocesses the kernel in another directory)",
    "__DATE__": "the build time (the race check builds the kernel again, later)",
    "__TIME__": "the build time (the race check builds the kernel again, later)",
    "__TIMESTAMP__": "the build time (the race check builds the kernel again, later)",
}
# Attributes that turn sanitizer instrumentation off (no_sanitize("thread"), no_sanitize_thread, ...).
_NO_SANITIZE = re.compile(r"_*(no_sanitize\w*|disable_sanitizer_instrumentation)_*")
# Attribute lists: `__attribute__ ((...))` in either spelling and any spacing (the list is read to its balanced close),
# and C2x `[[gnu::...]]`. A bad word counts with or without underscores around it (`__weakref__` is `weakref`).
_ATTRIBUTE_START = re.compile(r"\b__attribute(?:__)?\s*\(|\[\[")
_BAD_ATTRIBUTE_WORD = re.compile(
    r"(?<![A-Za-z0-9])_*(constructor|destructor|alias|weak|weakref|ifunc|section|symver|optimize|target_clones)_*(?![A-Za-z0-9])")
# Preprocessor lines that change what the race check's second preprocessing sees: line markers (`#line`, `# 1 "f"`)
# rename the lines after them, `__has_include` asks about files (the build and race-check directories differ).
_LINE_DIRECTIVE = re.compile(r"^\s*#\s*(line\b|\d)", re.M)
# Pragmas that switch floating-point semantics or apply attributes to every later declaration (clang).
_CLANG_PRAGMA = re.compile(r"#\s*pragma\s+(clang\s+(fp|optimize|attribute)\b|float_control\b|fenv_access\b|STDC\s+FENV_ACCESS\b)")
_INCLUDE = re.compile(r"^\s*#\s*(include|include_next|import)\b\s*(.*)$", re.M)
# Flags a candidate may add: optimization choices only (no plugins, no LTO, no paths, no preprocessor).
_ALLOWED_FLAG = re.compile(
    r"-O[0-3s]|-march=native|-mtune=native|-mprefer-vector-width=(128|256|512)|-m(no-)?(avx|avx2|fma|avx512f|sse4\.2)"
    r"|-f(no-)?(unroll-loops|unroll-all-loops|peel-loops|tree-vectorize|tree-loop-vectorize|tree-slp-vectorize"
    r"|tree-loop-distribution|prefetch-loop-arrays|omit-frame-pointer|strict-aliasing|ipa-pta|loop-interchange"
    r"|loop-unroll-and-jam|graphite-identity|loop-nest-optimize|loop-parallelize-all|openmp-simd|aggressive-loop-optimizations|inline-functions"
    r"|fast-math|unsafe-math-optimizations|associative-math|reciprocal-math|finite-math-only|signed-zeros|trapping-math)"
    r"|-fvect-cost-model=(unlimited|dynamic|cheap|very-cheap)|-ftree-parallelize-loops=[1-9][0-9]?|-ffp-contract=(off|on|fast)"
)
_FAST_MATH = re.compile(r"fast-math|unsafe-math|associative-math|reciprocal-math|finite-math|no-signed-zeros|fp-contract=fast")
_SYSTEM_HEADER = re.compile(r"^<[A-Za-z0-9_][A-Za-z0-9_./+-]*>$")


def strip_comments_and_strings(src: str) -> str:
    """Remove C/C++ comments and the contents of string/char literals, keeping line structure."""
    out: list[str] = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            chunk = src[i : (n if j < 0 else j + 2)]
            out.append("\n" * chunk.count("\n") or " ")
            i += len(chunk)
        elif c in "\"'":
            j = i + 1
            while j < n and src[j] != c and src[j] != "\n":
                j += 2 if src[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _balanced(code: str, i: int) -> str:
    """The text from the bracket at code[i] to its matching close (to the end when it has none)."""
    depth, j = 0, i
    while j < len(code):
        if code[j] in "([":
            depth += 1
        elif code[j] in ")]":
            depth -= 1
        j += 1
        if depth == 0:
            break
    return code[i:j]


def check_source(task: Task, candidate: Candidate) -> str | None:
    """Return why the candidate is rejected before compiling, or None if it may be built."""
    extra = sorted(set(candidate.files) - set(task.editable))
    if extra:
        return f"candidate edits {extra[0]}, which is not editable (editable: {', '.join(task.editable)})"
    if task.kernel not in candidate.files:
        return f"candidate has no {task.kernel}"
    src = candidate.files[task.kernel]
    if len(src.encode()) > MAX_SOURCE_BYTES:
        return f"{task.kernel} is larger than {MAX_SOURCE_BYTES // 1024} KiB"
    cuda = task.language == "cuda"
    if candidate.toolchain is not None and (cuda or task.uses_gpu or task.uses_mpi):
        return f"toolchain {candidate.toolchain!r} builds C/C++ CPU kernels without MPI only"
    for flag in candidate.cflags:
        if not (cuda_gate.ALLOWED_FLAG if cuda else _ALLOWED_FLAG).fullmatch(flag):
            return f"compiler flag {flag!r} is not allowed (only optimization flags; see docs/verification.md)"
        if not task.verify.allow_fast_math and (cuda_gate.FAST_MATH if cuda else _FAST_MATH).search(flag):
            return f"compiler flag {flag} changes floating-point semantics, which this task does not allow"
    for name, value in candidate.defines.items():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) or not re.fullmatch(r"[A-Za-z0-9_.+-]*", value):
            return f"define {name}={value} is not a plain identifier and value"
    why = check_text(src)
    if why or not cuda:
        return why
    return cuda_gate.check_source_rules(strip_comments_and_strings(re.sub(r"\\\r?\n", "", src).replace("%:", "#").replace("??=", "#")))


def check_text(src: str, includes: frozenset[str] | None = None) -> str | None:
    """Return why a C/C++/CUDA source text is rejected, or None. `includes`: the headers it may
    `#include <...>` (None: any <system> header). Shared with the Python gate's CUDA sources."""
    # Read the text the way the preprocessor does: spliced lines, digraph and trigraph '#'.
    spliced = re.sub(r"\\\r?\n", "", src).replace("%:", "#").replace("??=", "#")
    code = strip_comments_and_strings(spliced)
    original_lines = spliced.splitlines()
    for m in _INCLUDE.finditer(code):
        target = m.group(2).strip()
        allowed = _SYSTEM_HEADER.match(target) and ".." not in target and (includes is None or target[1:-1] in includes)
        if m.group(1) != "include" or not allowed:
            line_no = code.count("\n", 0, m.start())
            shown = original_lines[line_no].strip() if line_no < len(original_lines) else m.group(0).strip()
            which = "<system> headers" if includes is None else "<" + ">, <".join(sorted(includes)) + ">"
            return f"{shown[:80]} is not allowed: kernels may #include only {which}"
    if re.search(r"#\s*pragma\s+(weak|redefine_extname)", code):
        return "symbol-renaming pragmas are not allowed in a kernel"
    if re.search(r"#\s*pragma\s+GCC\s+(optimize|push_options|target)", code):
        return "#pragma GCC optimize/target is not allowed in a kernel: use candidate compiler flags"
    if "_Pragma" in code:
        return "_Pragma is not allowed in a kernel (write #pragma lines)"
    if _LINE_DIRECTIVE.search(code):
        return "#line directives and line markers are not allowed in a kernel"
    if _CLANG_PRAGMA.search(code):
        return "pragmas that change floating-point semantics or apply attributes are not allowed in a kernel"
    for start in _ATTRIBUTE_START.finditer(code):
        bad = _BAD_ATTRIBUTE_WORD.search(_balanced(code, start.end() - 1))
        if bad:
            return f"__attribute__(({bad.group(1)})) is not allowed in a kernel"
    for word in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", code):
        if word in _FORBIDDEN_WORDS:
            return f"uses {word}: {_FORBIDDEN_WORDS[word]} is not allowed in a kernel"
        if _NO_SANITIZE.fullmatch(word):
            return f"uses {word}: turning sanitizer instrumentation off is not allowed in a kernel (the race check must see it)"
    for m in re.finditer(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\(", code):
        name = m.group(1)
        if name in _FORBIDDEN_CALLS:
            return f"calls {name}(): {_FORBIDDEN_CALLS[name]} is not allowed in a kernel"
    return None


# Undefined symbols a kernel object may reference.
_LIBM = (
    "sqrt cbrt exp exp2 expm1 log log2 log10 log1p pow sin cos tan asin acos atan atan2 sinh cosh tanh "
    "asinh acosh atanh erf erfc tgamma lgamma fabs fmax fmin fma floor ceil round trunc rint lrint "
    "lround nearbyint fmod remainder hypot copysign ldexp frexp modf sincos"
).split()
_ALLOWED_EXACT = set(_LIBM) | {f + "f" for f in _LIBM} | {f + "l" for f in _LIBM} | {
    "malloc", "calloc", "realloc", "free", "aligned_alloc", "posix_memalign",
    "memcpy", "memmove", "memset", "memcmp", "qsort", "bsearch", "abs", "labs", "llabs",
    "__stack_chk_fail", "__stack_chk_guard", "_GLOBAL_OFFSET_TABLE_", "__assert_fail",
    "__muldc3", "__divdc3", "__mulsc3", "__divsc3",
    "__gxx_personality_v0", "_Unwind_Resume", "__cxa_begin_catch", "__cxa_end_catch",
    "__cxa_rethrow", "__cxa_throw", "__cxa_allocate_exception", "__cxa_free_exception",
    "__cxa_guard_acquire", "__cxa_guard_release", "__cxa_guard_abort", "__dso_handle",
} | {  # libgcc's integer arithmetic on 128-bit (and on x86-32, 64-bit) values: pure functions of their arguments
    # (gcc's graphite emits __divmodti4 for a loop bound it computes in 128 bits: tasks/loops/fir_bank)
    f"__{op}{w}{n}" for op, n in (("div", 3), ("mod", 3), ("udiv", 3), ("umod", 3), ("divmod", 4), ("udivmod", 4),
                                  ("mul", 3), ("mulo", 4), ("neg", 2), ("ashl", 3), ("ashr", 3), ("lshr", 3),
                                  ("clz", 2), ("ctz", 2), ("ffs", 2), ("popcount", 2), ("parity", 2))
    for w in ("di", "ti")
} | {  # and their conversions to floating point (__floattidf) and back (__fixunsdfti)
    f"__float{w}{f}" for w in ("di", "ti", "undi", "unti") for f in ("sf", "df", "xf")
} | {f"__{k}{f}{w}" for k in ("fix", "fixuns") for f in ("sf", "df", "xf") for w in ("di", "ti")}
_ALLOWED_PATTERN = re.compile(
    r"^(omp_(?!get_wtime|get_wtick)\w+|GOMP_\w+|__kmpc_\w+|MPI_(?!Wtime|Wtick)[A-Z]\w*|ompi_mpi_\w+|ompi_request_null"
    r"|ompi_message_\w+|_ZSt\w+|_ZNSt\w+|_ZNKSt\w+|_Znwm|_Znam|_ZdlPv\w*|_ZdaPv\w*|__\w+_finite)$"
)
# Names the pattern above admits that carry capabilities, not computation (the allow-list is audited
# for I/O, processes, files and threads): MPI's file I/O and dynamic processes (MPI_Comm_spawn runs
# programs), its job control, OpenMP's split region start/end (a team left running after the kernel
# returns) and device offload, C++ threads, files and standard streams.
_CAPABILITIES = re.compile(
    r"^(MPI_(File_\w+|Comm_spawn\w*|Comm_connect|Comm_accept|Comm_join|Open_port|Close_port|Publish_name"
    r"|Unpublish_name|Lookup_name|Register_datarep|Abort|Init\w*|Finalize|Pcontrol)"
    r"|GOMP_(parallel\w*_start|parallel_end|target\w*|offload\w*)|omp_target\w*"
    r"|_ZNSt\d*thread\w*|_ZNSt\d*jthread\w*|_ZNSt\d*(__basic_file|basic_filebuf|basic_[io]?fstream)\w*"
    r"|_ZSt\d*(cout|cerr|clog|cin|wcout|wcerr|wclog|wcin)\w*)$"
)
# OpenMP's split region start/end as compilers' own auto-parallelizers emit them (clang Polly's parallel loops:
# GOMP_parallel_loop_runtime_start ... GOMP_parallel_end): allowed in objects a trusted toolchain built from the
# task's own source (bench/peers.py), never in a candidate's.
_GOMP_SPLIT = re.compile(r"^GOMP_(parallel\w*_start|parallel_end)$")
_FORBIDDEN_SECTIONS = (".init_array", ".fini_array", ".preinit_array", ".ctors", ".dtors")
_RAW_SYSCALL = re.compile(r"\t(syscall|sysenter|int\s+\$0x80)\b")


def own_split_calls(nm_output: str) -> list[str]:
    """The OpenMP split-region functions an object references (`nm -P`: undefined or weak)."""
    out = []
    for line in nm_output.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[1] in ("U", "w", "v", "V", "W") and _GOMP_SPLIT.match(parts[0]):
            out.append(parts[0])
    return out


def allowed_symbol(name: str) -> bool:
    """May a kernel object reference this undefined symbol?"""
    return name in _ALLOWED_EXACT or (bool(_ALLOWED_PATTERN.match(name)) and not _CAPABILITIES.match(name))


def check_object(task: Task, nm_output: str, sections_output: str, disassembly: str, trusted_build: bool = False) -> str | None:
    """Return why the compiled kernel object is rejected, or None.

    `nm_output` is `nm -P kernel.o`, `sections_output` is `readelf -SW kernel.o`, `disassembly` is
    `objdump -d kernel.o` (for CUDA kernels: `readelf -SW -rW` and `objdump -dr`, see cuda_gate).
    `trusted_build`: the object is the task's own source built by a trusted toolchain (Toolchain, the peers
    bench), which may use OpenMP's split region calls that compilers' auto-parallelizers emit.
    """
    if task.language == "cuda":
        return cuda_gate.check_object(task.functions, task.signature, nm_output, sections_output, disassembly,
                                      allowed_symbol)
    for line in nm_output.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind in ("U", "w"):
            if not allowed_symbol(name) and not (trusted_build and _GOMP_SPLIT.match(name)):
                return f"kernel references {name}, which kernels may not use"
        elif kind == "i":
            return f"kernel defines {name} as an indirect function (ifunc), whose resolver runs before main"
        elif kind in ("T", "D", "B", "R", "C", "G", "S", "I", "A", "u"):
            if kind in ("B", "C") and name.startswith(".gomp_critical_user_"):
                continue  # gcc's lock for a named `critical(name)`: data, not code, and the name cannot be called
            if name not in task.functions:
                return (f"kernel defines global symbol {name}; it may define only {', '.join(task.functions)} "
                        "(make helpers static)")
        elif kind in ("W", "V"):
            if not (task.language == "cpp" and name.startswith("_Z")) and name not in task.functions:
                return f"kernel defines weak symbol {name}, which could replace harness or library code"
    if ".gnu.lto_" in sections_output:
        return "kernel object holds link-time-optimization bytecode, which cannot be inspected"
    for section in _FORBIDDEN_SECTIONS:
        if re.search(rf"\s{re.escape(section)}(\.\S*)?\s", sections_output):
            return "kernel has static constructors or destructors, which run outside the timed call"
    m = _RAW_SYSCALL.search(disassembly)
    if m:
        return f"kernel contains a raw {m.group(1)} instruction"
    missing = [f for f in task.functions if not re.search(rf"^{re.escape(f)} [TW] ", nm_output, re.M)]
    if missing:
        return f"kernel does not define {missing[0]} (signature: {task.signature})"
    return None
