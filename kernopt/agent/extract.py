"""Getting code and JSON out of model answers. Nothing here raises on a bad answer: a failure comes
back with a one-line reason written to be sent back to the model as feedback.

Code: fenced blocks (``` or ~~~, with or without a language tag) are named by their info line
(```c kernel.c, ```c title="kernel.c"), by a heading-like line just above them (**kernel.c**,
`File: kernel.c`, "Here is kernel.c:"), or by a comment on their first line (// file: kernel.c).
The block for the editable file is chosen by name (the last one if it appears twice); unnamed C-like
blocks are considered when no block carries the name, and must define the task's functions. Other
files are ignored. An answer with no fence at all is accepted only when it reads as a C file. A cut-off
answer (finish_reason "length", or an unterminated fence where the file would be) is a failure, unless
the file's block was complete before the cut.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from kernopt.evaluators.c_family.static_gate import strip_comments_and_strings

_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})[ \t]*([^\n`]*?)[ \t]*$")
_EXT = r"(?:c|h|cc|cpp|cxx|c\+\+|hpp|hh|hxx|cu|cuh|py|f90|f|s)"
_FILE = re.compile(rf"(?<![\w./-])([A-Za-z0-9_][\w./-]*\.{_EXT})(?![\w+-])")
_FIRST_LINE_NAME = re.compile(rf"^\s*(?://|/\*|#|--)\s*(?:file(?:name)?\s*[:=]\s*)?([\w./-]+\.{_EXT})\s*(?:\*/)?\s*$", re.I)
_CODE_LANGS = {"", "c", "h", "cpp", "c++", "cc", "cxx", "hpp", "cuda", "cu", "objective-c", "clike", "c99", "c11", "gnu"}
_PY_LANGS = {"", "python", "py", "python3"}
_PY_START = re.compile(r"^\s*(import\b|from\b|class\b|def\b|@|#|\"\"\")")
_CODE_START = re.compile(r"^\s*(#|//|/\*|static\b|void\b|double\b|float\b|int\b|long\b|unsigned\b|size_t\b|const\b|"
                         r"inline\b|extern\b|typedef\b|struct\b|template\b|namespace\b|using\b|auto\b|char\b|bool\b)")


@dataclass
class Block:
    """One fenced block of an answer."""

    lang: str
    name: str | None
    body: str
    complete: bool = True


@dataclass
class Extraction:
    """The editable file's new contents, or why there are none (`reason`, feedback for the model)."""

    code: str | None = None
    reason: str = ""
    # What went wrong: "empty", "no_code" (no code at all), "truncated", "wrong_file", "diff", "invalid".
    problem: str = ""
    ignored: list[str] = field(default_factory=list)  # other files the answer contained

    @property
    def ok(self) -> bool:
        return self.code is not None


def blocks(text: str) -> list[Block]:
    """Every fenced block, in order; a last block left open is returned with complete=False."""
    lines = text.splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info = m.group(1), m.group(2).strip()
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            close = _FENCE.match(lines[j])
            if close and close.group(1)[0] == fence[0] and len(close.group(1)) >= len(fence) and not close.group(2):
                break
            body.append(lines[j])
            j += 1
        lang, name = _parse_info(info)
        if name is None:
            name = _name_from_prose(lines[:i])
        if name is None and body:
            first = _FIRST_LINE_NAME.match(body[0])
            if first and not (body[0].lstrip().startswith("#") and "file" not in body[0].lower()):
                name = first.group(1)
        out.append(Block(lang, name, "\n".join(body) + "\n", complete=j < len(lines)))
        i = j + 1
    return out


def _parse_info(info: str) -> tuple[str, str | None]:
    """```c kernel.c / ```kernel.c / ```c title="kernel.c" / ```c:kernel.c -> (language, file name)."""
    first = re.split(r"[\s:{]", info, maxsplit=1)[0] if info else ""
    names = _FILE.findall(info)
    if first and names and first == names[0]:  # ```kernel.c: the language is the extension
        return first.rsplit(".", 1)[1].lower(), first
    return first.lower(), (names[-1] if names else None)


def _name_from_prose(before: list[str]) -> str | None:
    """A file named by a heading-like line just above a fence ("**kernel.c**", "File: kernel.c", "... kernel.c:")."""
    for line in reversed(before[-2:]):
        if not line.strip():
            continue
        text = line.strip()
        if len(text) > 160:
            return None
        bare = re.sub(r"^(#+|\*+|[-*]\s)|[*`_]", "", text).strip().rstrip(":").strip()
        bare = re.sub(r"^(?:file(?:name)?|path)\s*[:=]\s*", "", bare, flags=re.I)
        names = set(_FILE.findall(text))
        if _FILE.fullmatch(bare) or (text.endswith(":") and len(names) == 1):
            return _FILE.findall(bare)[-1] if _FILE.fullmatch(bare) else names.pop()
        return None
    return None


def _same_file(name: str, filename: str) -> bool:
    a, b = PurePosixPath(name.lstrip("./")), PurePosixPath(filename)
    return a == b or a.name == b.name


def _is_python(filename: str) -> bool:
    return filename.endswith(".py")


def _problem(code: str, filename: str, functions: Sequence[str]) -> str | None:
    """Why the chosen code cannot be the file: missing functions (classes, for Python), unbalanced
    braces, Python that does not parse."""
    if not code.strip():
        return f"the block for {filename} is empty"
    if _is_python(filename):
        try:
            tree = ast.parse(code)
        except SyntaxError as e:
            return f"{filename} does not parse as Python (line {e.lineno}: {e.msg})"
        defined = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
        missing = [f for f in functions if f not in defined]
        return f"{filename} must define {', '.join(missing)}, but the code does not" if missing else None
    bare = strip_comments_and_strings(code)
    missing = [f for f in functions if not re.search(rf"\b{re.escape(f)}\s*\([^;{{}}]*\)\s*\{{", bare)]
    if missing:
        return f"{filename} must define {', '.join(f + '()' for f in missing)} with the task's signature, but the code does not"
    opened, closed = bare.count("{"), bare.count("}")
    if opened != closed:
        return f"{filename} is incomplete or malformed: {opened} '{{' but {closed} '}}'"
    return None


def extract_code(text: str | None, filename: str, functions: Sequence[str] = (), *, truncated: bool = False) -> Extraction:
    """The new contents of `filename` from a model answer. `functions`: names the file must define.
    `truncated`: the model stopped because it ran out of tokens (finish_reason "length")."""
    text = text or ""
    python = _is_python(filename)
    lang = "python" if python else "c"
    code_langs, code_start = (_PY_LANGS, _PY_START) if python else (_CODE_LANGS, _CODE_START)
    whole = f"answer with the complete {filename} in one fenced code block (```{lang} {filename})"
    cut = f"the answer was cut off before {filename} was complete; {whole}, with no explanation"
    if not text.strip():
        return Extraction(reason=f"the answer is empty; {whole}", problem="empty")
    found = blocks(text)
    if not found:
        if truncated:
            return Extraction(reason=cut, problem="truncated")
        first = next((ln for ln in text.splitlines() if ln.strip()), "")
        if code_start.match(first) and _problem(text, filename, functions) is None:
            return Extraction(code=text.strip() + "\n")
        return Extraction(reason=f"the answer has no code block; {whole}", problem="no_code")
    named = [b for b in found if b.name and _same_file(b.name, filename)]
    others = sorted({b.name for b in found if b.name and not _same_file(b.name, filename)})
    unnamed = [b for b in found if not b.name and b.lang in code_langs]
    pool = named or unnamed
    if any(not b.complete for b in pool):
        return Extraction(reason=cut, ignored=others, problem="truncated")
    if not pool:
        if truncated:
            return Extraction(reason=cut, ignored=others, problem="truncated")
        if any(b.lang in ("diff", "patch") for b in found):
            return Extraction(reason=f"the answer is a diff; {whole}, not a diff", ignored=others, problem="diff")
        if others:
            return Extraction(reason=f"the answer has {', '.join(others)} but not {filename}; {whole}", ignored=others, problem="wrong_file")
        return Extraction(reason=f"the answer has no {'Python' if python else 'C'} code block; {whole}", ignored=others, problem="no_code")
    if named:
        chosen = named[-1]
    else:
        defining = [b for b in unnamed if _problem(b.body, filename, functions) is None]
        chosen = defining[-1] if defining else max(unnamed, key=lambda b: len(b.body))
    problem = _problem(chosen.body, filename, functions)
    if problem:
        return Extraction(reason=f"{problem}; {whole}", ignored=others, problem="invalid")
    return Extraction(code=chosen.body, ignored=others)


def _objects(text: str) -> list[dict[str, Any]]:
    """JSON objects found in text, by position (an outer object before the objects inside it).
    A trailing comma before a closing bracket is forgiven."""
    decoder = json.JSONDecoder()
    out: list[dict[str, Any]] = []
    for i, ch in enumerate(text):
        if ch != "{":
            continue
        for candidate in (text[i:], re.sub(r",(\s*[}\]])", r"\1", text[i:])):
            try:
                value, _ = decoder.raw_decode(candidate)
            except (ValueError, RecursionError):  # RecursionError: thousands of nested brackets
                continue
            if isinstance(value, dict):
                out.append(value)
            break
    return out


def extract_json(text: str | None, keys: Sequence[str] = ()) -> tuple[dict[str, Any] | None, str]:
    """The first JSON object in an answer that has one of `keys` (any object when none are given):
    fenced blocks first, then bare JSON anywhere in the text. Prose around it is fine.
    Returns (object, "") or (None, reason)."""
    text = text or ""
    if not text.strip():
        return None, "the answer is empty"
    found = blocks(text)
    for source in [*(b.body for b in found if b.lang not in _CODE_LANGS - {""}), text]:
        for value in _objects(source):
            if not keys or any(k in value for k in keys):
                return value, ""
    what = f"JSON object with {' or '.join(repr(k) for k in keys)}" if keys else "JSON object"
    if (found and not found[-1].complete) or text.count("{") > text.count("}"):
        return None, f"the answer was cut off before the {what} was complete"
    return None, f"the answer contains no {what}"
