"""The file's own `#define` macros expanded in its code, line for line, for the tuner's loop analysis.

People index arrays through macros (`#define IDX(i, j) ((i) * n + (j))`, `#define AT(i, p) a[(i) * k + (p)]`);
the dependence analysis (deps.py) reads C expressions, not macro calls, so a nest that uses them was "outside
the model". `expand(source)` returns the source with every use of a macro the file itself defines replaced by
its body, as the preprocessor would, and nothing else changed: directive lines, comments and strings stay,
and every line stays on its row (a loop's line in the expansion is its line in the original), so verdicts found
on the expansion apply to the original's loops. Macros from headers are not known here and stay as they are.

Left unexpanded (the use stays, and the analysis then says "don't know" as before): bodies with `#` or `##`,
variadic macros, a call whose argument count does not match, and a macro used inside its own expansion.
Integer constants (`#define L 128`) stay too: the analysis reads them as constants already.
"""

from __future__ import annotations

import re

_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)(\(([^)]*)\))?(.*)$")
_INT = re.compile(r"\(?\s*-?\d+[uUlL]*\s*\)?")
_IDENT = re.compile(r"[A-Za-z_]\w*")
_NUMBER = re.compile(r"\.?\d(?:[eEpP][+-]|[\w.])*")  # a preprocessing number (`1e-5`, `0x1F`, `10UL`): no identifier inside
_DEPTH = 16  # nested expansions at most (a cycle stops here, unexpanded)


class _Macro:
    def __init__(self, params: list[str] | None, body: str) -> None:
        self.params, self.body = params, body


def definitions(source: str) -> dict[str, _Macro]:
    """The macros the file defines (a later #define wins, #undef removes), continuation lines joined."""
    out: dict[str, _Macro] = {}
    lines = source.split("\n")
    k = 0
    while k < len(lines):
        line = lines[k]
        while line.endswith("\\") and k + 1 < len(lines):
            k += 1
            line = line[:-1] + " " + lines[k]
        k += 1
        undef = re.match(r"^[ \t]*#[ \t]*undef[ \t]+([A-Za-z_]\w*)", line)
        if undef:
            out.pop(undef.group(1), None)
            continue
        m = _DEFINE.match(line)
        if m is None:
            continue
        name, params, body = m.group(1), m.group(3), _strip_comments(m.group(4)).strip()
        if "#" in body or (params is not None and "..." in params) or (params is None and _INT.fullmatch(body)):
            out.pop(name, None)  # stringizing, pasting, variadic, or an integer constant: left as it is
            continue
        names = [p.strip() for p in params.split(",")] if params is not None and params.strip() else []
        if params is not None and not all(_IDENT.fullmatch(p) for p in names):
            out.pop(name, None)
            continue
        out[name] = _Macro(names if params is not None else None, body)
    return out


def _strip_comments(text: str) -> str:
    return re.sub(r"/\*.*?\*/|//.*$", " ", text)


def expand(source: str) -> str:
    """The source with the file's own macros expanded in its code (see the module docstring)."""
    macros = definitions(source)
    if not macros:
        return source
    out: list[str] = []
    i, n = 0, len(source)
    line_start = True
    while i < n:
        c = source[i]
        if line_start and source[i:].lstrip(" \t").startswith("#"):  # a directive: copied, with its continuations
            end = i
            while True:
                nl = source.find("\n", end)
                if nl < 0:
                    end = n
                    break
                if source[end:nl].endswith("\\"):
                    end = nl + 1
                    continue
                end = nl
                break
            out.append(source[i:end])
            i = end
            continue
        if c == "\n":
            line_start = True
            out.append(c)
            i += 1
            continue
        if c in " \t":
            out.append(c)
            i += 1
            continue
        line_start = False
        if source.startswith("/*", i) or source.startswith("//", i) or c in "\"'":
            end = _skip_literal(source, i)
            out.append(source[i:end])
            i = end
            continue
        m = _NUMBER.match(source, i) or _IDENT.match(source, i)
        if m is None or m.re is _NUMBER:
            out.append(m.group() if m else c)
            i = m.end() if m else i + 1
            continue
        text, end = _expand_use(source, m.group(), m.end(), macros, frozenset())
        out.append(text)
        i = end
    return "".join(out)


def _skip_literal(s: str, i: int) -> int:
    """The end of the comment or string/char literal starting at s[i]."""
    if s.startswith("/*", i):
        j = s.find("*/", i + 2)
        return len(s) if j < 0 else j + 2
    if s.startswith("//", i):
        j = s.find("\n", i)
        return len(s) if j < 0 else j
    quote, j = s[i], i + 1
    while j < len(s) and s[j] != quote and s[j] != "\n":
        j += 2 if s[j] == "\\" else 1
    return min(j + 1, len(s))


def _arguments(s: str, i: int) -> tuple[list[str], int] | None:
    """The arguments of a call whose `(` is at s[i] (top-level commas split them), and the end of the call."""
    depth, start, args = 0, i + 1, []
    j = i
    while j < len(s):
        c = s[j]
        if c in "\"'" or s.startswith("/*", j) or s.startswith("//", j):
            j = _skip_literal(s, j)
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                args.append(s[start:j])
                return args, j + 1
        elif c == "," and depth == 1:
            args.append(s[start:j])
            start = j + 1
        j += 1
    return None


def _expand_use(s: str, name: str, end: int, macros: dict[str, _Macro], active: frozenset[str]) -> tuple[str, int]:
    """The text that replaces the identifier `name` ending at s[end], and where the replaced text ends."""
    macro = macros.get(name)
    if macro is None or name in active or len(active) >= _DEPTH:
        return name, end
    if macro.params is None:
        return _rescan(macro.body, macros, active | {name}), end
    j = end
    while j < len(s) and s[j] in " \t\n":
        j += 1
    if j >= len(s) or s[j] != "(":
        return name, end  # a function-like macro's name without a call: not a use
    got = _arguments(s, j)
    if got is None:
        return name, end
    args, stop = got
    if len(args) == 1 and not args[0].strip() and not macro.params:
        args = []
    if len(args) != len(macro.params):
        return name, end
    newlines = s.count("\n", end, stop)
    values = {p: _rescan(" ".join(a.split()), macros, active) for p, a in zip(macro.params, args, strict=True)}
    body = _IDENT.sub(lambda m: values.get(m.group(), m.group()), macro.body)
    return _rescan(body, macros, active | {name}) + "\n" * newlines, stop


def _rescan(text: str, macros: dict[str, _Macro], active: frozenset[str]) -> str:
    out, i = [], 0
    while i < len(text):
        if text[i] in "\"'":
            j = _skip_literal(text, i)
            out.append(text[i:j])
            i = j
            continue
        m = _NUMBER.match(text, i) or _IDENT.match(text, i)
        if m is None or m.re is _NUMBER:
            out.append(m.group() if m else text[i])
            i = m.end() if m else i + 1
            continue
        got, i = _expand_use(text, m.group(), m.end(), macros, active)
        out.append(got)
    return "".join(out)
