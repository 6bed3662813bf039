"""The race check's ThreadSanitizer report, read as the candidate's to forge.

The sanitizer runs inside the candidate's process, so every byte of its report file (the descriptor the
monitor opened for it, KO_REPORT_FD) could have been written by the kernel instead. Nothing of it is
ever copied out as text. The file is parsed against the shapes ThreadSanitizer (clang 14, run with
`symbolize=0`: the process may not start a symbolizer) prints; a line of any other shape makes the
whole file `forged`, a verdict of its own. From a well-formed data-race report only numbers are kept
(module offsets, thread numbers, access kinds); kernopt symbolizes the offsets itself, with addr2line
on the binary it built, and what it prints is checked again: a file that is the kernel (or kernopt's
driver, or the task's harness), a line inside it, a function name that is an identifier defined there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

SEPARATOR = "=================="
_THREAD = r"(?:main thread|thread T\d+)"
_FRAME = re.compile(r"^ {4}#(\d+) <null> <null> \(([\w.+-]+|\[[a-z]+\])\+0x([0-9a-f]{1,16})\)(?: \(BuildId: [0-9a-f]+\))?$")
_ACCESS = re.compile(rf"^ {{2}}(Previous )?(atomic |Atomic )?(read|write|Read|Write) of size (\d+) at 0x[0-9a-f]+ by ({_THREAD})"
                     r"(?: \(mutexes: [\w, ]*\))?:$")
_HEADER = re.compile(r"^WARNING: ThreadSanitizer: ([a-z][a-z() -]*[a-z)]) \(pid=\d+\)$")
# Every other line a report may hold (clang 14's sanitizer_common and tsan_report.cpp, symbolize=0).
_OTHER = [re.compile(p) for p in (
    r"^$",
    SEPARATOR,
    r"^ {4}\[failed to restore the stack\]$",
    rf"^ {{2}}Location is heap block of size \d+ at 0x[0-9a-f]+ allocated by {_THREAD}:$",
    rf"^ {{2}}Location is (?:stack|TLS) of {_THREAD}\.$",
    r"^ {2}Location is global '<null>'(?: of size \d+)? at 0x[0-9a-f]+ \(([\w.+-]+|\[[a-z]+\])\+0x[0-9a-f]+\)$",
    r"^ {2}Location is file descriptor \d+ (?:created by|destroyed by) " + _THREAD + r" at:$",
    r"^ {2}Mutex M\d+ \(0x[0-9a-f]+\) created at:$",
    rf"^ {{2}}Mutex M\d+ acquired here while holding mutex M\d+ in {_THREAD}:$",
    r"^ {2}Cycle in lock order graph: M\d+ \(0x[0-9a-f]+\)(?: => M\d+ \(0x[0-9a-f]+\))+$",
    r"^ {2}Hint: use TSAN_OPTIONS=second_deadlock_stack=1 to get more informative warning message$",
    rf"^ {{2}}Thread T\d+ \(tid=\d+, (?:running|finished)\) created by {_THREAD} at:$",
    r"^ {2}Thread T\d+ \(tid=\d+, (?:running|finished)\) is a GCD worker thread$",
    r"^ {2}Thread T\d+ \(tid=\d+, (?:running|finished)\)$",
    r"^ {2}As if synchronized via sleep:$",
    r"^ {4}#\d+ (?:nanosleep|usleep|sleep) <null> \([\w.+-]+\+0x[0-9a-f]+\)(?: \(BuildId: [0-9a-f]+\))?$",
    r"^SUMMARY: ThreadSanitizer: [a-z][a-z() -]*[a-z)] \([\w./+-]+\+0x[0-9a-f]+\)(?: \(BuildId: [0-9a-f]+\))?$",
    r"^ThreadSanitizer: reported \d+ warnings$",
    r"^ThreadSanitizer:DEADLYSIGNAL$",
)]
# From here on the sanitizer is dying: what follows is its crash output (any shape), and the run's verdict
# is "unavailable", whatever else the file holds.
_CRASH = re.compile(r"^(?:==\d+==)?(?:ERROR|FATAL): ThreadSanitizer: |^ThreadSanitizer: CHECK failed: ")
_LIBRARY = re.compile(r"^lib[\w+-]*(?:\.[\w+-]+)*\.so(?:\.\d+)*$")
_ALLOCATOR = re.compile(r"^(?:__interceptor_)?(malloc|calloc|realloc|free|posix_memalign|aligned_alloc|memalign|valloc|pvalloc)$"
                        r"|^_Zn[wa]\w*$|^operator new")
# The OpenMP allocation API a kernel may call itself: memory from it is the kernel's, not the runtime's.
_USER_OMP_ALLOC = re.compile(r"^(omp_(aligned_)?(alloc|calloc|realloc)|__kmpc_(aligned_)?(alloc|calloc|realloc))$")
_NAME = re.compile(r"^[A-Za-z_.$][\w.$]{0,127}$")
MAX_REPORT_BYTES = 4 << 20


class Forged(Exception):
    """The report file is not what ThreadSanitizer writes: the message is a fixed phrase of kernopt's."""


@dataclass(frozen=True)
class Frame:
    module: str  # the binary's name or a shared library's (validated names)
    offset: int


@dataclass(frozen=True)
class Access:
    kind: str  # "read" | "write" (atomic ones say so: "atomic write")
    thread: str  # "main thread" | "thread T3"
    frames: tuple[Frame, ...]


@dataclass
class Report:
    """One data-race report: the two accesses and, for a heap location, the block's allocation stack."""

    current: Access
    previous: Access | None
    allocation: tuple[Frame, ...] | None = None


@dataclass
class Parsed:
    races: list[Report] = field(default_factory=list)
    crash: str = ""  # a fixed phrase when the sanitizer died
    other_warnings: int = 0  # reports of other kinds (thread leaks, ...): not races


def parse(text: str, binary: str) -> Parsed:
    """Read a report file. Raises Forged when any line is of a shape the sanitizer does not print, or a
    frame names a module that is neither `binary` nor a shared library."""
    out = Parsed()
    lines = [ln.rstrip(" ") for ln in text.split("\n")]  # the sanitizer ends some lines with a space
    if lines and lines[-1] == "":
        lines.pop()
    i = 0
    while i < len(lines):
        line = lines[i]
        if _CRASH.match(line):
            out.crash = ("ThreadSanitizer cannot run under this kernel's address-space randomization (lower vm.mmap_rnd_bits "
                         "to 28, or set eval.race_compiler to a newer clang)" if "unexpected memory mapping" in line
                         else "ThreadSanitizer crashed")
            return out
        m = _HEADER.match(line)
        if m:
            block: list[str] = []
            i += 1
            while i < len(lines) and lines[i] != SEPARATOR and not _CRASH.match(lines[i]):
                block.append(lines[i])
                i += 1
            if m.group(1) == "data race":
                out.races.append(_race(block, binary))
            else:
                for ln in block:
                    _check_line(ln, binary)
                out.other_warnings += 1
            continue
        _check_line(line, binary)
        i += 1
    return out


def _check_line(line: str, binary: str) -> None:
    f = _FRAME.match(line)
    if f:
        _module(f.group(2), binary)
        return
    if _ACCESS.match(line) or any(p.match(line) for p in _OTHER):
        return
    raise Forged("a line of a shape ThreadSanitizer does not print")


def _module(name: str, binary: str) -> str:
    if name == binary or _LIBRARY.match(name):
        return name
    raise Forged("a stack frame in a module that is neither the checked program nor a shared library")


def _stack(block: list[str], i: int, binary: str) -> tuple[tuple[Frame, ...], int]:
    frames: list[Frame] = []
    while i < len(block):
        f = _FRAME.match(block[i])
        if f:
            if int(f.group(1)) != len(frames):
                raise Forged("stack frames out of order")
            frames.append(Frame(_module(f.group(2), binary), int(f.group(3), 16)))
        elif block[i] != "    [failed to restore the stack]":
            break
        i += 1
    return tuple(frames), i


def _race(block: list[str], binary: str) -> Report:
    accesses: list[Access] = []
    allocation: tuple[Frame, ...] | None = None
    i = 0
    while i < len(block):
        line = block[i]
        a = _ACCESS.match(line)
        if a:
            frames, i = _stack(block, i + 1, binary)
            kind = ("atomic " if a.group(2) else "") + a.group(3).lower()
            if bool(a.group(1)) != bool(accesses):  # the current access first, then the previous one
                raise Forged("a data-race report with its accesses out of order")
            accesses.append(Access(kind, a.group(5), frames))
            continue
        if line.startswith("  Location is heap block"):
            _check_line(line, binary)
            allocation, i = _stack(block, i + 1, binary)
            continue
        _check_line(line, binary)
        i += 1
    if not accesses or len(accesses) > 2 or not accesses[0].frames:
        raise Forged("a data-race report without its accesses")
    return Report(accesses[0], accesses[1] if len(accesses) > 1 else None, allocation)


@dataclass(frozen=True)
class Place:
    """A symbolized frame: kernopt's addr2line on kernopt's binary, then validated."""

    function: str
    file: str
    line: int


def offsets(parsed: Parsed, binary: str) -> list[int]:
    """Every offset into the binary that the reports name (what to symbolize)."""
    seen: dict[int, None] = {}
    for r in parsed.races:
        for frames in (r.current.frames, r.previous.frames if r.previous else (), r.allocation or ()):
            for f in frames:
                if f.module == binary:
                    seen[f.offset] = None
    return list(seen)


def read_addr2line(text: str) -> dict[int, Place]:
    """`addr2line -f -a -e BINARY OFFSETS...` output: address, function, file:line, per offset."""
    out: dict[int, Place] = {}
    rows = text.splitlines()
    for k in range(0, len(rows) - 2, 3):
        addr, fn, where = rows[k], rows[k + 1], rows[k + 2]
        file, _, line = where.rpartition(":")
        line = line.split(" ", 1)[0]
        try:
            out[int(addr, 16)] = Place(fn, file.rsplit("/", 1)[-1], int(line) if line.isdigit() else 0)
        except ValueError:
            continue
    return out


def runtime_memory(r: Report, places: dict[int, Place], binary: str) -> bool:
    """Is the racy location a heap block the OpenMP runtime allocated for itself? (The first frame of its
    allocation stack past the allocator is in libomp, and the kernel did not ask for it through omp_alloc.)
    Archer does not see the runtime's own ordering of such memory (a task descriptor, reused)."""
    for f in r.allocation or ():
        name = places[f.offset].function if f.module == binary and f.offset in places else ""
        if _USER_OMP_ALLOC.match(name):
            return False
        if _ALLOCATOR.match(name):
            continue
        return f.module.startswith("libomp")
    return False


def describe(r: Report, places: dict[int, Place], binary: str, sources: dict[str, int], defined: set[str]) -> str:
    """The report as kernopt states it, from validated parts only: 'kernel.c:9 in kernel (a write by thread T2;
    the previous write by the main thread at kernel.c:9)'. `sources`: file name -> line count, for the files
    whose lines may be named (the kernel, the driver, the harness); `defined`: the kernel object's functions.
    Raises Forged when the racy access's own frame is not a place in the program."""
    def where(a: Access) -> str:
        for f in a.frames:
            p = places.get(f.offset) if f.module == binary else None
            if p and p.file in sources and 1 <= p.line <= sources[p.file] and _NAME.match(p.function):
                fn = p.function if p.function.removesuffix("_debug__") in defined or p.file != "kernel.c" else "?"
                return f"{p.file}:{p.line} in {fn}"
        return "a place outside the kernel's source"
    top = r.current.frames[0]
    if top.module == binary and (top.offset not in places or places[top.offset].function == "??"):
        raise Forged("a racy access at an address that is no code of the checked program")
    text = f"{where(r.current)} (a {r.current.kind} by {_thread(r.current.thread)}"
    if r.previous:
        text += f"; the previous {r.previous.kind} by {_thread(r.previous.thread)} at {where(r.previous)}"
    return text + ")"


def valid_name(name: str) -> bool:
    """Is `name` an identifier kernopt may print (a C name, or a compiler's name for an outlined region)?"""
    return bool(_NAME.match(name))


def _thread(t: str) -> str:
    return "the main thread" if t == "main thread" else t
