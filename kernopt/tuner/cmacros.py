"""The file's own `#define` macros expanded in its code, line for line, for the tuner's loop analysis.

People index arrays through macros (`#define IDX(i, j) ((i) * n + (j))`, `#define AT(i, p) a[(i) * k + (p)]`);
the dependence analysis (deps.py) reads C expressions, not macro calls, so a nest that uses them was "outside
the model". `expand(source)` returns the source with every use of a macro the file itself defines replaced by
its body, as the preprocessor would, and nothing else changed: directive lines, comments and strings stay,
and every line stays on its row (a loop's line in the expansion is its line in the original), so verdicts found
on the expansion apply to the original's loops. The restructuring moves write their candidates from this text,
so it must mean what the original means.

Only macros whose meaning does not depend on where or how the file is compiled are expanded: defined once, never
`#undef`ined, outside every `#if`/`#ifdef`/`#ifndef` block, and only at uses after the definition. Left
unexpanded too (the use stays, and the analysis then says "don't know" as before): macros from headers, bodies
with `#` or `##` or an unterminated comment, variadic macros, a call whose argument count does not match, and a
macro used inside its own expansion. Integer constants (`#define L 128`) stay: the analysis reads them as
constants already.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(\w+)[ \t]*(.*)$", re.S)
_DEFINE = re.compile(r"([A-Za-z_]\w*)(\(([^)]*)\))?(.*)$", re.S)
_INT = re.compile(r"\(?\s*-?(0|[1-9]\d*)[lL]*\s*\)?")  # decimal and signed only: `010` is 8, `1u` unsigned
_IDENT = re.compile(r"[A-Za-z_]\w*")
_NUMBER = re.compile(r"\.?\d(?:[eEpP][+-]|[\w.])*")  # a preprocessing number (`1e-5`, `0x1F`, `10UL`, `0.5f`)
_DEPTH = 16  # nested expansions at most (a cycle stops here, unexpanded)


@dataclass(frozen=True)
class _Macro:
    params: tuple[str, ...] | None  # None: object-like
    body: str
    after: int  # offset of the end of its #define line: only later uses are expanded


def definitions(source: str) -> dict[str, _Macro]:
    """The macros of the file that mean the same wherever the file is compiled (see the module docstring), but for
    integer constants, which stay as they are (`constants`)."""
    return {name: m for name, m in _all_definitions(source).items() if m.params is not None or not _INT.fullmatch(m.body)}


def constants(source: str, before: int) -> dict[str, int]:
    """The file's integer constants (`#define L 128`, `#define N (64)`) under the same rules, defined before `before`."""
    out = {}
    for name, m in _all_definitions(source).items():
        if m.params is None and _INT.fullmatch(m.body) and m.after <= before:
            out[name] = int(m.body.strip("() \t").rstrip("lL"))
    return out


def _all_definitions(source: str) -> dict[str, _Macro]:
    out: dict[str, _Macro] = {}
    seen: dict[str, int] = {}
    depth = 0
    pos = 0
    blank = _blank_comments(source)  # a `#define` inside a comment is no directive
    lines, raw = blank.split("\n"), source.split("\n")
    k = 0
    while k < len(lines):
        line, text, start = lines[k], raw[k], pos
        pos += len(lines[k]) + 1
        while line.endswith("\\") and k + 1 < len(lines):
            k += 1
            line, text = line[:-1] + " " + lines[k], text[:-1] + " " + raw[k]
            pos += len(lines[k]) + 1
        k += 1
        d = _DIRECTIVE.match(line)
        if d is None:
            continue
        word, rest = d.group(1), d.group(2)
        if word in ("if", "ifdef", "ifndef"):
            depth += 1
        elif word == "endif":
            depth = max(0, depth - 1)
        if word not in ("define", "undef"):
            continue
        m = _DEFINE.match(rest)
        if m is None:
            continue
        name = m.group(1)
        seen[name] = seen.get(name, 0) + 1
        if word == "undef" or depth or seen[name] > 1:
            out.pop(name, None)
            continue
        params, body = m.group(3), m.group(4)
        if "#" in body or _strip_comments(text) is None:
            continue  # stringizing, pasting, or a comment that runs past the line (it would take the next one in)
        names = tuple(p.strip() for p in params.split(",")) if params is not None and params.strip() else ()
        if params is not None and not all(_IDENT.fullmatch(p) for p in names):
            continue  # variadic (`...`) or malformed
        out[name] = _Macro(names if params is not None else None, body.strip(), start + len(line))
    return {name: m for name, m in out.items() if seen[name] == 1}


def _blank_comments(source: str) -> str:
    """The source with every comment's characters but its newlines turned into spaces (same offsets, same lines)."""
    return _without_comments(source, keep_offsets=True)[0]


def _strip_comments(text: str) -> str | None:
    """The text with its comments replaced by a space (string literals kept); None for an unterminated one."""
    out, closed = _without_comments(text, keep_offsets=False)
    return out if closed else None


def _without_comments(text: str, keep_offsets: bool) -> tuple[str, bool]:
    """The text with each comment blanked (keep_offsets: every character but newlines a space) or one space, string
    and character literals kept; and whether every block comment was closed."""
    out, i, closed = [], 0, True
    while i < len(text):
        if text.startswith("/*", i) or text.startswith("//", i):
            end = _skip_literal(text, i)
            if text.startswith("/*", i) and not text[i:end].endswith("*/"):
                closed = False
            out.append("".join(c if c == "\n" else " " for c in text[i:end]) if keep_offsets else " ")
            i = end
        elif text[i] in "\"'":
            end = _skip_literal(text, i)
            out.append(text[i:end])
            i = end
        else:
            out.append(text[i])
            i += 1
    return "".join(out), closed


def expand(source: str) -> str:
    """The source with the file's own macros expanded in its code (see the module docstring); the source as it is
    where the expansion nests too deep to follow."""
    try:
        return _expand(source)
    except RecursionError:
        return source


def _expand(source: str) -> str:
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
        text, end = _expand_use(source, m.group(), m.end(), {k: v for k, v in macros.items() if v.after <= i}, frozenset())
        out.append(_spaced(out[-1][-1:] if out else "", text, source[end:end + 1]))
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
    cleaned = [_strip_comments(a) for a in args]
    if len(args) != len(macro.params) or any(a is None for a in cleaned):
        return name, end
    newlines = s.count("\n", end, stop)  # put back after the expansion: the lines below keep their rows
    # the arguments go in as written and are expanded in the rescan, where this macro's name is off (`ID(s)` with
    # `#define s (s + 1)` is `(s + 1)`, as gcc has it, not `((s + 1) + 1)`)
    values = {p: a.replace("\n", " ").strip() for p, a in zip(macro.params, cleaned, strict=True) if a is not None}
    body = _substitute(macro.body, values)
    return _rescan(body, macros, active | {name}) + "\n" * newlines, stop


_WORD = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_PUNCT = set("+-*/%&|^<>=!.:#")


def _spaced(before: str, text: str, after: str) -> str:
    """An expansion with a space on a side where it would run into its neighbour and make another token, as the
    preprocessor keeps tokens apart (`-NEG_N` with `#define NEG_N -n` is `- -n`, never `--n`)."""
    def glue(a: str, b: str) -> bool:
        return bool(a and b) and (a in _WORD and b in _WORD or a in _PUNCT and b in _PUNCT)

    if not text:
        return " "
    return (" " if glue(before, text[0]) else "") + text + (" " if glue(text[-1], after) else "")


def _tokens(text: str) -> list[tuple[str, bool]]:
    """The text as (piece, is an identifier) pairs: literals and numbers are pieces of their own, never identifiers."""
    out, i = [], 0
    while i < len(text):
        if text[i] in "\"'" or text.startswith("/*", i) or text.startswith("//", i):
            j = _skip_literal(text, i)
            out.append((text[i:j], False))
            i = j
            continue
        m = _NUMBER.match(text, i) or _IDENT.match(text, i)
        if m is None:
            out.append((text[i], False))
            i += 1
        else:
            out.append((m.group(), m.re is _IDENT))
            i = m.end()
    return out


def _substitute(body: str, values: dict[str, str]) -> str:
    return "".join(values.get(t, t) if ident else t for t, ident in _tokens(body))


def _rescan(text: str, macros: dict[str, _Macro], active: frozenset[str]) -> str:
    out: list[str] = []
    pieces = _tokens(text)
    k, offset = 0, 0  # offset: where pieces[k] starts in text
    while k < len(pieces):
        piece, ident = pieces[k]
        if not ident or piece not in macros:
            out.append(piece)
            offset += len(piece)
            k += 1
            continue
        got, end = _expand_use(text, piece, offset + len(piece), macros, active)
        out.append(_spaced(out[-1][-1:] if out else "", got, text[end:end + 1]))
        while k < len(pieces) and offset < end:  # the pieces the use consumed (its name and arguments)
            offset += len(pieces[k][0])
            k += 1
    return "".join(out)
