"""The OpenMP directives of a kernel, as the static race check (kernopt/evaluators/c_family/race_static.py) reads
them: a `#pragma omp` line as directive words and clauses, the vocabulary the checker knows, and the kernel's source
(its tree with pragma lines blanked, each directive tied to the statement it applies to, the line map of its `#line`
markers)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import tree_sitter as ts

from kernopt.evaluators.c_family.race_static.syntax import _IDENT
from kernopt.tuner.cloops import _PARSER, _field, _text, _walk

_OMP_LINE = re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+omp\b(.*)$")
_LINE_MARK = re.compile(r"^[ \t]*#[ \t]*(?:line[ \t]+)?(\d+)\b")  # `#line 12 "kernel.c"`, `# 12 "kernel.c" 1`
_STATEMENTS = ("expression_statement", "compound_statement", "for_statement", "if_statement", "while_statement",
               "do_statement", "declaration", "return_statement", "switch_statement", "break_statement",
               "continue_statement", "goto_statement", "labeled_statement", "empty_statement")
# Directive words; anything else at the head of a directive is unknown to the checker.
_KNOWN = {"parallel", "for", "simd", "sections", "section", "single", "master", "masked", "critical", "atomic",
          "barrier", "taskwait", "taskgroup", "task", "taskloop", "ordered", "flush", "threadprivate", "taskyield",
          "declare"}
_UNSUPPORTED = {"teams", "target", "distribute", "loop", "scan", "cancel", "cancellation", "metadirective",
                "workshare", "scope", "tile", "unroll", "requires", "allocate", "depobj", "error", "assume",
                "assumes", "interop", "dispatch", "begin", "end", "nothing", "declare"}
_BARE_CLAUSES = {"nowait", "untied", "mergeable", "nogroup", "seq_cst", "read", "write", "update", "capture",
                 "compare", "relaxed", "acquire", "release", "acq_rel", "inbranch", "notinbranch", "threads",
                 "weak", "fail"}
_PRIVATE_CLAUSES = ("private", "firstprivate", "lastprivate", "linear", "reduction", "in_reduction", "copyprivate")


@dataclass
class _Directive:
    row: int
    end: int  # byte offset of the line's end
    words: tuple[str, ...]
    clauses: dict[str, list[str]]  # clause name -> argument texts (one per occurrence)
    text: str

    def has(self, *ws: str) -> bool:
        return any(w in self.words for w in ws)

    def names(self, *clauses: str) -> set[str]:
        out: set[str] = set()
        for c in clauses:
            for arg in self.clauses.get(c, []):
                body = arg.split(":", 1)[1] if c in ("reduction", "in_reduction", "task_reduction") and ":" in arg else arg
                if c == "linear":
                    body = body.split(":", 1)[0]
                    body = re.sub(r"\b(val|ref|uval)\s*\(", "", body)
                if c == "lastprivate" and ":" in body:
                    body = body.split(":", 1)[1]
                for item in _split_top(body):
                    m = _IDENT.match(item.strip().lstrip("(&*").strip())
                    if m:
                        out.add(m.group())
        return out


def _split_top(s: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return [x for x in out if x.strip()]


def _parse_directive(text: str, row: int, end: int) -> _Directive:
    words: list[str] = []
    clauses: dict[str, list[str]] = {}
    i = 0
    s = text.replace(",", " ")
    while i < len(s):
        m = re.compile(r"\s*([A-Za-z_]\w*)\s*").match(s, i)
        if not m:
            if s[i:].strip():
                words.append("?")
            break
        word, j = m.group(1), m.end()
        if j < len(s) and s[j] == "(":
            depth, k = 0, j
            while k < len(s):
                depth += s[k] == "("
                depth -= s[k] == ")"
                if depth == 0:
                    break
                k += 1
            arg = text[j + 1:k]  # the original text (commas kept)
            if word == "critical" and not clauses and words == []:
                words.append("critical")
            clauses.setdefault(word, []).append(arg)
            i = k + 1
            continue
        if word in _BARE_CLAUSES or clauses or (word == "ordered" and words):  # `for ordered`: the clause
            clauses.setdefault(word, []).append("")
        else:
            words.append(word)
        i = j
    return _Directive(row, end, tuple(words), clauses, text)


def _const_clause(d: _Directive, name: str) -> int | None:
    for arg in d.clauses.get(name, []):
        try:
            return int(arg.strip().rstrip("uUlL"), 0)
        except ValueError:
            return None
    return None


class _Source:
    """The kernel's text, tree, OpenMP directives and line map."""

    def __init__(self, source: str) -> None:
        self.source = source
        raw = source.encode()
        # pragma lines and line markers blanked (same offsets): pragmas are read from the text
        self.data = re.sub(rb"(?m)^[ \t]*#[ \t]*(pragma\b|line\b|\d).*$", lambda m: b" " * len(m.group()), raw)
        self.tree = _PARSER.parse(self.data)
        self.root = self.tree.root_node
        lines = source.split("\n")
        self.line_of: list[int] = []
        offset, current = 0, 1
        self.directives: list[_Directive] = []
        self.problems: list[tuple[int, str]] = []
        for row, line in enumerate(lines):
            offset += len(line.encode()) + 1
            m = _LINE_MARK.match(line)
            self.line_of.append(current)
            current = int(m.group(1)) if m else current + 1
            om = _OMP_LINE.match(line)
            if om:
                if line.rstrip().endswith("\\"):
                    self.problems.append((row, "a directive continued over lines"))
                self.directives.append(_parse_directive(om.group(1), row, offset - 1))
        if "_Pragma" in source:
            row = source[:source.index("_Pragma")].count("\n")
            self.problems.append((row, "a _Pragma operator (check the preprocessed kernel)"))
        self.stmt_at: dict[int, list[ts.Node]] = {}
        for n in _walk(self.root):
            if n.type in _STATEMENTS and n.parent is not None:
                self.stmt_at.setdefault(n.start_byte, []).append(n)
        self.on: dict[int, list[_Directive]] = {}  # statement node id -> directives on it, outermost first
        self.standalone: list[_Directive] = []
        for d in self.directives:
            if d.has("barrier", "taskwait", "flush", "taskyield", "threadprivate") or (
                    d.has("ordered") and ("depend" in d.clauses or "doacross" in d.clauses)) or d.has(
                    "cancel", "cancellation", "declare", "requires", "end", "begin", "error", "nothing"):
                self.standalone.append(d)
                continue
            target = self._target(d)
            if target is None:
                self.problems.append((d.row, "a directive whose statement could not be found"))
                continue
            self.on.setdefault(target.id, []).append(d)
        self.functions: dict[str, ts.Node] = {}
        for f in self.root.named_children:
            if f.type == "function_definition":
                name = self.func_name(f)
                if name:
                    self.functions[name] = f

    def _target(self, d: _Directive) -> ts.Node | None:
        at = d.end
        while at < len(self.data) and self.data[at:at + 1] in (b" ", b"\t", b"\n", b"\r"):
            at += 1
        if self.data[at:at + 2] in (b"//", b"/*"):
            return None
        nodes = self.stmt_at.get(at)
        if not nodes:
            return None
        return max(nodes, key=lambda n: n.end_byte - n.start_byte)

    @staticmethod
    def func_name(f: ts.Node) -> str:
        d = _field(f, "declarator")
        while d is not None and d.type != "function_declarator":
            d = _field(d, "declarator")
        ident = _field(d, "declarator") if d is not None else None
        return _text(ident) if ident is not None and ident.type == "identifier" else ""

    def line(self, node_or_row: ts.Node | int) -> int:
        row = node_or_row if isinstance(node_or_row, int) else node_or_row.start_point[0]
        return self.line_of[row] if 0 <= row < len(self.line_of) else row + 1
