"""Tunables for sources that are not compiled with -D flags (torch-family Python files).

A C-family candidate's `defines` become `-DNAME=value`. A Python solution has no preprocessor, so
its knobs are written into the source before it runs: a top-level `NAME = <number or string>`
assignment (a Triton block size, `num_warps`, `num_stages` handed to the launch) or a
`#define NAME value` line inside the CUDA source strings it compiles. The rewritten source is what
is verified and timed; the candidate keeps its original files plus the knob values, like C.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable


class KnobError(ValueError):
    """A knob the source does not declare (one line)."""


def _top_level_assignment(tree: ast.Module, name: str) -> ast.Assign | ast.AnnAssign | None:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return node
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            return node
    return None


def declared_knobs(source: str) -> set[str]:
    """Names a Python source declares as knobs: top-level constant assignments and `#define`s."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    names = {t.id for node in tree.body if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
             for t in node.targets if isinstance(t, ast.Name)}
    names |= set(re.findall(r"(?m)^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+\S", source))
    return names


def knob_values(source: str) -> dict[str, str]:
    """The value each knob has in `source` (its `#define` or top-level constant), as the text a define would carry."""
    out = {m.group(1): m.group(2) for m in re.finditer(r"(?m)^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+(\S+)", source)}
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return out
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out[t.id] = str(node.value.value)
    return out


def _define_with(value: str) -> Callable[[re.Match[str]], str]:
    return lambda m: f"{m.group(1)}{value}{m.group(3)}"


def apply_knobs(source: str, defines: dict[str, str]) -> str:
    """`source` with each knob set. Raises KnobError for a knob it does not declare."""
    if not defines:
        return source
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source  # the evaluator reports the syntax error itself
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int, int, str]] = []  # (line index, col start, col end, text)
    for name, value in sorted(defines.items()):
        node = _top_level_assignment(tree, name)
        if node is not None and node.value is not None and node.value.end_lineno == node.value.lineno == node.lineno:
            literal = value if re.fullmatch(r"-?\d+(\.\d+)?", value) else repr(value)
            edits.append((node.lineno - 1, node.value.col_offset, node.value.end_col_offset or 0, literal))
            continue
        pattern = re.compile(rf"(?m)^([ \t]*#[ \t]*define[ \t]+{re.escape(name)}[ \t]+)(\S[^\n\\]*?)([ \t]*(?://[^\n]*)?)$")
        if pattern.search(source):
            source_lines = "".join(lines)
            source_lines = pattern.sub(_define_with(value), source_lines)
            lines = source_lines.splitlines(keepends=True)
            tree = ast.parse(source_lines)
            continue
        raise KnobError(f"knob {name} is not declared in the source (a top-level `{name} = ...` or a `#define {name} ...`)")
    # apply assignment edits right to left so earlier columns stay valid
    for line, start, end, text in sorted(edits, key=lambda e: (e[0], -e[1])):
        raw = lines[line].encode()
        lines[line] = (raw[:start] + text.encode() + raw[end:]).decode()
    return "".join(lines)
