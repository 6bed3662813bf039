"""A compact compiler report of one C-family kernel: gcc's vectorization summary and stack usage.

After a successful build, a step of its own compiles the candidate's source a second time
(`report_command`, at most TIMEOUT_S): the same compiler, flags and source with `-fopt-info-vec-optimized
-fopt-info-vec-missed -fstack-usage`, writing an object nobody links or inspects. The linked
kernel.o is built exactly as before, so nothing timed or verified depends on the report; a compiler
that does not know the flags (clang) prints an error and the report is simply empty.

`summarize` turns gcc's messages into at most MAX_LINES lines, one per loop (by line of the kernel
file: vectorized with which vector sizes, or not and the first reason given), then the stack frame of
each function (a large frame hints at register spills or big local arrays). The text is compiler
output about an untrusted source: only printable ASCII is kept, lines and the whole are capped, and it
is advice for the LLM roles only: never part of a verdict, a reason or a flag.
"""

from __future__ import annotations

import re
import shlex

MAX_LINES = 15
MAX_LINE_CHARS = 160
MAX_CHARS = MAX_LINES * (MAX_LINE_CHARS + 1)  # the bound that follows from the two above
REPORT_FLAGS = ["-fopt-info-vec-optimized", "-fopt-info-vec-missed", "-fstack-usage"]
OPTINFO_FILE, STACK_FILE = "optinfo.txt", "report.su"
TIMEOUT_S = 60.0  # the report's compile, a sandboxed step of its own after the build (it never fails the build)

_MSG = re.compile(r"^(?:\./)?(?P<file>[^:\s]+):(?P<line>\d+):(?P<col>\d+): (?P<kind>optimized|missed|note): (?P<text>.*)$")
_VECTORS = re.compile(r"loop vectorized using (\d+) byte vectors")
_GIMPLE = re.compile(r"\s+(?:[A-Za-z_.$][\w.$]*\s*=|_\d+\b|\*?_\d+|MEM\b|\.[A-Z]).*$")  # GIMPLE statements after a reason
_SU = re.compile(r"^(?:\./)?(?P<file>[^:\s]+):(?P<line>\d+):(?P<col>\d+):(?P<fn>\S+)\s+(?P<bytes>\d+)\s+(?P<kind>[\w,]+)\s*$")


def report_command(cc: list[str]) -> str:
    """The shell command that compiles `cc` (the kernel object's own command, ending in `-o kernel.o`) a
    second time for the report only: same source and flags, plus REPORT_FLAGS, into report.o; messages go
    to OPTINFO_FILE, the stack usage to STACK_FILE. Never fails the build step."""
    cmd = [*cc[:-2], *REPORT_FLAGS, "-o", "report.o"] if cc[-2:] == ["-o", "kernel.o"] else [*cc, *REPORT_FLAGS]
    return f"{{ {shlex.join(cmd)} >/dev/null 2>{OPTINFO_FILE} || true; }}"


def _clean(text: str) -> str:
    """Printable ASCII only, no backticks (the text sits in a fenced block of a prompt), one line, capped."""
    text = "".join(ch if 32 <= ord(ch) < 127 else " " for ch in text).replace("`", "'")
    text = " ".join(text.split())
    return text if len(text) <= MAX_LINE_CHARS else text[: MAX_LINE_CHARS - 3] + "..."


def _reason(text: str) -> str:
    """gcc's reason without the GIMPLE statement it quotes ('not suitable for strided load _12 = *_11;' ->
    'not suitable for strided load')."""
    text = text.strip().removeprefix("not vectorized:").strip().rstrip(".")
    text = _GIMPLE.sub("", text).rstrip(" :;.")
    if text.startswith("statement clobbers memory:"):  # keep the call's name, not its arguments
        text = text.split("(")[0].rstrip()
    return text


def summarize(optinfo: str, stack: str, source: str, kernel: str) -> str | None:
    """The report's lines (None when gcc said nothing about `kernel`: not gcc, or no loops)."""
    src = source.splitlines()
    # per line of the kernel file: [vector sizes], [reasons]; "loop" marks a line gcc called a loop
    loops: dict[int, dict[str, list[str]]] = {}
    current: int | None = None
    for raw in optinfo.splitlines():
        m = _MSG.match(raw.strip())
        if not m or m["file"].rsplit("/", 1)[-1] != kernel:
            continue
        line, kind, text = int(m["line"]), m["kind"], m["text"].strip()
        if kind == "optimized":
            entry = loops.setdefault(line, {"vec": [], "why": [], "what": []})
            v = _VECTORS.search(text)
            if v:
                entry["vec"].append(v.group(1))
            elif "basic block" in text:
                entry["what"].append("straight-line code vectorized (SLP)")
            elif "versioned" in text:
                entry["what"].append(_reason(text))
            current = None
        elif kind == "missed":
            if text.startswith("couldn't vectorize loop"):
                current = line
                loops.setdefault(line, {"vec": [], "why": [], "what": []})
                continue
            why = _reason(text)
            if not why:
                continue
            at = current if current is not None else line
            entry = loops.setdefault(at, {"vec": [], "why": [], "what": []})
            where = f" (line {line})" if at != line else ""
            if why + where not in entry["why"]:
                entry["why"].append(why + where)
    lines: list[str] = []
    for line in sorted(loops):
        e = loops[line]
        code = _clean(src[line - 1].strip())[:60] if 0 < line <= len(src) else ""
        label = f"line {line}" + (f" ({code})" if code else "")
        if e["vec"]:
            sizes = sorted(set(e["vec"]), key=lambda s: -int(s))
            lines.append(f"{label}: loop vectorized, {' and '.join(sizes)}-byte vectors")
        elif e["why"]:
            lines.append(f"{label}: not vectorized: {'; '.join(e['why'][:2])}")
        elif e["what"]:
            lines.append(f"{label}: {'; '.join(dict.fromkeys(e['what']))}")
        else:
            lines.append(f"{label}: loop not vectorized")
    frames = []
    for raw in stack.splitlines():
        m = _SU.match(raw.strip())
        if m and m["file"].rsplit("/", 1)[-1] == kernel:
            frames.append(f"{m['fn']} {m['bytes']} B ({m['kind']})")
    extra = 1 if frames else 0
    if len(lines) > MAX_LINES - extra:
        cut = len(lines) - (MAX_LINES - extra - 1)
        lines = [*lines[: MAX_LINES - extra - 1], f"... {cut} more lines"]
    if frames:
        lines.append("stack frames: " + ", ".join(frames[:8]) + (f", ... {len(frames) - 8} more" if len(frames) > 8 else ""))
    if not lines:
        return None
    return "\n".join(_clean(ln) for ln in lines)
