"""Loop analysis of C kernels with tree-sitter-c: find `for` loops, their OpenMP shape, insert pragmas.

`analyze(source)` returns every `for` inside a function body (preorder) with what the tuner needs to
place `#pragma omp parallel for` / `simd`: canonical form, nesting, reductions and privates, existing
pragmas, and hints for the prior (triangular or indirect bounds, obvious recurrences). Pragmas are
inserted by text edit, so the rest of the source is kept byte for byte.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import tree_sitter as ts
import tree_sitter_c as tsc

_PARSER = ts.Parser(ts.Language(tsc.language()))
_COMPOUND_OPS = {"+=": "+", "-=": "+", "*=": "*", "&=": "&", "|=": "|", "^=": "^"}
_MINMAX = {"fmax": "max", "fmaxf": "max", "fmaxl": "max", "fmin": "min", "fminf": "min", "fminl": "min"}
_ARITH_TYPEDEF = re.compile(r"^(u?int\w*_t|size_t|ssize_t|ptrdiff_t)$")  # integer typedefs
_OMP = re.compile(r"^\s*#\s*pragma\s+omp\b")
_NESTING = ("for_statement", "while_statement", "do_statement", "switch_statement")


@dataclass(frozen=True)
class Loop:
    """One `for` statement and its OpenMP-relevant facts (byte offsets into the UTF-8 source)."""

    index: int
    start: int
    end: int
    line: int  # 0-based row of the `for`
    indent: str
    depth: int  # enclosing `for` loops
    parent: int | None  # index of the enclosing `for`
    children: tuple[int, ...]  # indices of the `for` loops directly inside
    var: str | None
    canonical: bool  # OpenMP canonical form; no break/return/goto leaves the body
    inner_var: str | None  # set when perfectly nested: body is one canonical `for` whose header ignores var
    innermost: bool
    pragmas: tuple[str, ...]  # `#pragma` lines directly before the loop
    enclosing_omp: tuple[str, ...]  # omp pragmas on enclosing statements
    inner_omp: tuple[str, ...]  # omp pragma lines inside the body
    reductions: tuple[tuple[str, str], ...]  # (operator, variable)
    private: tuple[str, ...]  # outer variables assigned before any use in each iteration
    triangular: bool  # a nested loop's bounds depend on var
    indirect: bool  # loop bounds read from arrays (CSR-like)
    recurrence: bool  # an array is written and read at textually different subscripts
    uses_var: bool  # var is used in the body (a time-step loop's is not)
    calls: frozenset[str]  # functions called in the body
    levels: int  # loop nesting below this one (0 = innermost)
    size: int  # body bytes

    @property
    def perfect(self) -> bool:
        """collapse(2) is legal: perfectly nested, inner bounds independent of var (not triangular)."""
        return self.inner_var is not None

    @property
    def omp(self) -> tuple[str, ...]:
        return tuple(p for p in self.pragmas if _OMP.match(p))

    @property
    def parallelizable(self) -> bool:
        """May carry a new `parallel for`: canonical, no pragma on it, no OpenMP construct around or inside it.

        (gcc accepts only one loop pragma per loop: `#pragma GCC ivdep` + `#pragma omp simd` is an error.)
        """
        return (self.canonical and not self.pragmas and not self.enclosing_omp
                and not any("parallel" in p for p in self.inner_omp))

    @property
    def simdable(self) -> bool:
        """May carry a new `simd`: innermost, canonical, no pragma on it, no omp inside, not inside a simd."""
        return (self.innermost and self.canonical and not self.pragmas and not self.inner_omp
                and not any("simd" in p for p in self.enclosing_omp))


def _walk(node: ts.Node | None) -> Iterator[ts.Node]:
    stack = [node] if node is not None else []
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def _text(node: ts.Node | None) -> str:
    return node.text.decode(errors="replace") if node is not None and node.text is not None else ""


def _names(node: ts.Node | None) -> set[str]:
    return {_text(n) for n in _walk(node) if n.type == "identifier"}


def _field(node: ts.Node | None, name: str) -> ts.Node | None:
    return node.child_by_field_name(name) if node is not None else None


def _ancestors(n: ts.Node) -> list[ts.Node]:
    out, p = [], n.parent
    while p is not None:
        out.append(p)
        p = p.parent
    return out


def _target(n: ts.Node) -> ts.Node | None:
    """What an assignment or ++/-- writes."""
    return _field(n, "left") if n.type == "assignment_expression" else (
        _field(n, "argument") if n.type == "update_expression" else None)


def _loop_var(loop: ts.Node) -> str | None:
    init = _field(loop, "initializer")
    if init is not None and init.type == "declaration":
        decls = [c for c in init.named_children if c.type == "init_declarator"]
        name = _field(decls[0], "declarator") if len(decls) == 1 else None
        return _text(name) if name is not None and name.type == "identifier" else None
    if init is not None and init.type == "assignment_expression" and _text(_field(init, "operator")) == "=":
        left = _field(init, "left")
        return _text(left) if left is not None and left.type == "identifier" else None
    return None


def _escapes(body: ts.Node) -> bool:
    """Whether the body has a break (not inside a nested loop/switch), a return or a goto."""
    stack = [(c, False) for c in body.children]
    while stack:
        n, nested = stack.pop()
        if n.type in ("return_statement", "goto_statement") or (n.type == "break_statement" and not nested):
            return True
        stack.extend((c, nested or n.type in _NESTING) for c in n.children)
    return False


def _canonical(loop: ts.Node, var: str | None, kinds: dict[str, str]) -> bool:
    """OpenMP canonical loop over an integer or pointer variable that leaves only at its condition."""
    cond, upd, body, init = (_field(loop, f) for f in ("condition", "update", "body", "initializer"))
    if var is None or cond is None or upd is None or body is None or cond.type != "binary_expression":
        return False
    if init is not None and init.type == "declaration":
        decl = _field(init, "declarator")
        kind = "pointer" if decl is not None and decl.type == "init_declarator" and _field(
            decl, "declarator").type == "pointer_declarator" else _type_kind(_field(init, "type"))  # type: ignore[union-attr]
    else:
        kind = kinds.get(var, "")
    if kind not in ("int", "pointer"):
        return False
    sides = [_field(cond, "left"), _field(cond, "right")]
    if _text(_field(cond, "operator")) not in ("<", "<=", ">", ">=") or all(var in _names(s) for s in sides):
        return False
    if not any(s is not None and s.type == "identifier" and _text(s) == var for s in sides):
        return False
    if upd.type == "assignment_expression" and _text(_field(upd, "operator")) not in ("+=", "-="):
        return False
    written = [_target(n) for n in _walk(body)]
    return _text(_target(upd)) == var and var not in {_text(w) for w in written} and not _escapes(body)


def _pragma_rows(lines: list[bytes], row: int, col: int) -> list[int]:
    """Rows of the `#pragma` lines directly above (row, col), top-down; none if code precedes col."""
    if lines[row][:col].strip():
        return []
    rows, r = [], row - 1
    while r >= 0 and (not lines[r].strip() or lines[r].lstrip().startswith((b"#pragma", b"# pragma", b"//"))):
        rows += [r] if lines[r].lstrip().startswith(b"#") else []
        r -= 1
    return rows[::-1]


def _base(node: ts.Node | None) -> str | None:
    while node is not None and node.type == "subscript_expression":
        node = _field(node, "argument")
    return _text(node) if node is not None and node.type == "identifier" else None


def _recurrence(body: ts.Node) -> bool:
    """An array written at one subscript and read at another inside the body."""
    writes: dict[str, set[str]] = {}
    subs = [n for n in _walk(body) if n.type == "subscript_expression"
            and not (n.parent is not None and _field(n.parent, "argument") == n)]
    for n in _walk(body):
        t = _target(n)
        if t is not None and t.type == "subscript_expression" and _base(t):
            writes.setdefault(_base(t) or "", set()).add(_text(t))
    return any(_text(s) not in writes.get(_base(s) or "", {_text(s)}) for s in subs)


def _reduction_op(name: str, occ: list[ts.Node]) -> str | None:
    """The reduction operator if every occurrence of name is part of one kind of reduction update."""
    ops, used = set(), set()
    for o in (o for o in occ if o.parent is not None):
        if o.id in used:
            continue
        p, op, parts = o.parent, None, [o]
        if p.type == "update_expression":
            op = "+"
        elif p.type == "assignment_expression" and _field(p, "left") == o:
            kind, right = _text(_field(p, "operator")), _field(p, "right")
            if kind in _COMPOUND_OPS and name not in _names(right):
                op = _COMPOUND_OPS[kind]
            elif kind == "=" and right is not None:
                op, extra = _rhs_op(name, right)
                parts += extra
        elif p.type == "binary_expression":
            op, extra = _if_max(name, p)
            parts += extra
        if op is None:
            return None
        ops.add(op)
        used.update(n.id for n in parts)
    return ops.pop() if len(ops) == 1 else None


def _rhs_op(name: str, right: ts.Node) -> tuple[str | None, list[ts.Node]]:
    """`s = s + e`, `s = e * s`, `s = s - e`, `s = fmax(s, e)`: the op and the read of s it consumes."""
    op = _text(_field(right, "operator"))
    if right.type == "binary_expression" and op in ("+", "-", "*"):
        left, rhs = _field(right, "left"), _field(right, "right")
        for mine, other in [(left, rhs)] + ([(rhs, left)] if op != "-" else []):
            if mine is not None and mine.type == "identifier" and _text(mine) == name and name not in _names(other):
                return ("*" if op == "*" else "+"), [mine]
    fn = _text(_field(right, "function"))
    if right.type == "call_expression" and fn in _MINMAX:
        args = [a for a in (_field(right, "arguments") or right).named_children if a.type != "comment"]
        mine = [a for a in args if a.type == "identifier" and _text(a) == name]
        if len(args) == 2 and len(mine) == 1 and name not in _names(next(a for a in args if a != mine[0])):
            return _MINMAX[fn], mine
    return None, []


def _if_max(name: str, cond: ts.Node) -> tuple[str | None, list[ts.Node]]:
    """`if (e > s) s = e;` (max) or `if (e < s) s = e;` (min): the op and the nodes of s consumed."""
    paren = cond.parent
    stmt = paren.parent if paren is not None and paren.type == "parenthesized_expression" else None
    if stmt is None or stmt.type != "if_statement" or _field(stmt, "alternative") is not None:
        return None, []
    op, left, right = _text(_field(cond, "operator")), _field(cond, "left"), _field(cond, "right")
    if op not in ("<", ">", "<=", ">=") or left is None or right is None:
        return None, []
    mine_left = left.type == "identifier" and _text(left) == name
    mine, other = (left, right) if mine_left else (right, left)
    body = _field(stmt, "consequence")
    if body is not None and body.type == "compound_statement" and len(body.named_children) == 1:
        body = body.named_children[0]
    assign = body.named_children[0] if body is not None and body.type == "expression_statement" else None
    if (mine.type != "identifier" or _text(mine) != name or name in _names(other) or assign is None
            or assign.type != "assignment_expression" or _text(_field(assign, "operator")) != "="
            or _text(_field(assign, "left")) != name or _text(_field(assign, "right")) != _text(other)):
        return None, []
    target = _field(assign, "left")
    return ("max" if (op in (">", ">=")) != mine_left else "min"), [mine] + ([target] if target else [])


def _assigned_first(name: str, occ: list[ts.Node], body: ts.Node) -> bool:
    """The first occurrence is `name = e` (e without name) and dominates every other occurrence."""
    assign = occ[0].parent
    if assign is None or assign.type != "assignment_expression" or _field(assign, "left") != occ[0] or (
            _text(_field(assign, "operator")) != "=" or name in _names(_field(assign, "right"))):
        return False
    cur = assign
    while cur != body and cur.parent is not None:  # climb while the assignment runs unconditionally
        p = cur.parent
        if not (p.type in ("expression_statement", "compound_statement")
                or (p.type == "for_statement" and _field(p, "initializer") == cur)):
            break
        cur = p
    return all(cur.start_byte <= o.start_byte < cur.end_byte for o in occ)


def _decl_name(node: ts.Node | None) -> str:
    while node is not None and node.type != "identifier":
        node = _field(node, "declarator")
    return _text(node)


def _type_kind(ty: ts.Node | None) -> str:
    """'int' for integer types, 'float' for floating types, 'scalar' otherwise (structs, unknown typedefs)."""
    words = set(_text(ty).split())
    if ty is not None and ty.type in ("primitive_type", "sized_type_specifier") or _ARITH_TYPEDEF.match(_text(ty)):
        return "float" if words & {"float", "double", "_Complex"} else "int"
    return "scalar"


def _declarations(root: ts.Node, at: int) -> dict[str, str]:
    """Names in scope at byte `at` -> 'int' | 'float' | 'scalar' | 'pointer' | 'array' (last one wins)."""
    kinds: dict[str, str] = {}
    for d in _walk(root):
        if d.type not in ("declaration", "parameter_declaration") or d.start_byte > at:
            continue
        scope = d.parent
        while d.type == "parameter_declaration" and scope is not None and scope.type != "function_definition":
            scope = scope.parent
        if scope is None or not (scope.start_byte <= at < scope.end_byte or scope.type == "translation_unit"):
            continue
        for decl in d.children_by_field_name("declarator"):
            node = _field(decl, "declarator") if decl.type == "init_declarator" else decl
            kind = {"identifier": _type_kind(_field(d, "type")), "pointer_declarator": "pointer",
                    "array_declarator": "array"}.get(node.type if node is not None else "")
            if kind:
                kinds[_decl_name(node)] = kind
    return kinds


def _scalars(root: ts.Node, loop: ts.Node, var: str | None) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """Reductions and privates for the outer-scope variables the body writes."""
    body = _field(loop, "body")
    local = {_decl_name(d) for n in _walk(body) if n.type == "declaration"
             for d in n.children_by_field_name("declarator")}
    occ: dict[str, list[ts.Node]] = {}
    for n in _walk(body):
        if n.type == "identifier":
            occ.setdefault(_text(n), []).append(n)
    kinds = _declarations(root, loop.start_byte)
    written = {_text(t) for n in _walk(body) if (t := _target(n)) is not None and t.type == "identifier"}
    reductions, private = [], []
    for name in sorted(written - local - {var}):
        op = _reduction_op(name, occ[name]) if kinds.get(name) in ("int", "float") else None
        if op is not None and (op in "+*max min" or kinds[name] == "int"):  # no bitwise ops on floats
            reductions.append((op, name))
        elif kinds.get(name, "array") != "array" and body and _assigned_first(name, occ[name], body):
            private.append(name)
    return tuple(reductions), tuple(private)


def _perfect(n: ts.Node, var: str | None) -> ts.Node | None:
    """The single canonical loop nested in n whose header does not use var, or None."""
    body = _field(n, "body")
    if body is not None and body.type == "compound_statement":
        stmts = [c for c in body.named_children if c.type != "comment"]
        body = stmts[0] if len(stmts) == 1 else None
    if body is None or body.type != "for_statement":
        return None
    inner = _loop_var(body)
    header = [_field(body, f) for f in ("initializer", "condition", "update")]
    return body if inner != var and _canonical(body, inner) and not any(var in _names(h) for h in header) else None


def _levels(n: ts.Node) -> int:
    below = [m for m in _walk(_field(n, "body")) if m.type == "for_statement"]
    return 1 + max(_levels(m) for m in below) if below else 0


def analyze(source: str) -> list[Loop]:
    """Every `for` loop inside a function body, in source order."""
    data = source.encode()
    # Pragmas are read from the text; hidden from the parser, which mis-nests `for (..) #pragma .. for`.
    tree = _PARSER.parse(re.sub(rb"(?m)^[ \t]*#[ \t]*pragma\b.*$", lambda m: b" " * len(m.group()), data))
    lines = data.split(b"\n")
    nodes = [n for n in _walk(tree.root_node) if n.type == "for_statement" and {"function_definition"} <= {
        a.type for a in _ancestors(n)} and "ERROR" not in {a.type for a in _ancestors(n)}]
    index = {n.id: i for i, n in enumerate(nodes)}
    parents = [next((index[a.id] for a in _ancestors(n) if a.id in index), None) for n in nodes]
    pragmas = {n.id: tuple(lines[r].decode(errors="replace").strip() for r in _pragma_rows(lines, *n.start_point))
               for n in nodes}
    loops: list[Loop] = []
    for i, n in enumerate(nodes):
        anc = _ancestors(n)
        var, body = _loop_var(n), _field(n, "body")
        row = n.start_point[0]
        below = [m for m in _walk(body) if m.type == "for_statement"]
        bounds = [x for m in [n, *below] for x in (_field(m, "initializer"), _field(m, "condition"))]
        reductions, private = _scalars(tree.root_node, n, var)
        canonical = _canonical(n, var)
        inner = _perfect(n, var) if canonical else None
        body_text = data[body.start_byte:body.end_byte].decode(errors="replace") if body is not None else ""
        loops.append(Loop(
            index=i, start=n.start_byte, end=n.end_byte, line=row,
            indent=re.match(rb"[ \t]*", lines[row]).group().decode(),  # type: ignore[union-attr]
            depth=sum(a.id in index for a in anc), parent=parents[i],
            children=tuple(j for j, p in enumerate(parents) if p == i), var=var, canonical=canonical,
            inner_var=_loop_var(inner) if inner is not None and not pragmas[inner.id] else None,
            innermost=not below, pragmas=pragmas[n.id],
            enclosing_omp=tuple(lines[r].decode(errors="replace").strip() for a in anc if a.type.endswith("statement")
                                for r in _pragma_rows(lines, *a.start_point) if _OMP.match(lines[r].decode(errors="replace"))),
            inner_omp=tuple(m.group().strip() for m in re.finditer(r"^[ \t]*#\s*pragma\s+omp\b.*$", body_text,
                                                                   re.MULTILINE)),
            reductions=reductions, private=private,
            triangular=var is not None and any(var in _names(x) for x in bounds[2:]),
            indirect=any(s.type == "subscript_expression" for x in bounds for s in _walk(x)),
            recurrence=body is not None and _recurrence(body),
            uses_var=var is not None and var in _names(body),
            calls=frozenset(_text(_field(s, "function")) for s in _walk(body) if s.type == "call_expression"),
            levels=_levels(n), size=len(body_text.encode())))
    return loops


def insert_pragma(source: str, loop: Loop, pragma: str) -> str:
    """Source with `pragma` on its own line, at the loop's indentation, right before the loop."""
    text = pragma.strip() if pragma.strip().startswith("#") else "#pragma " + pragma.strip()
    data = source.encode()
    line_start = data.rfind(b"\n", 0, loop.start) + 1
    if data[line_start:loop.start].strip():  # code before the `for` on its line: break the line
        new = f"\n{loop.indent}{text}\n{loop.indent}".encode()
        return (data[:loop.start] + new + data[loop.start:]).decode()
    return (data[:line_start] + f"{loop.indent}{text}\n".encode() + data[line_start:]).decode()


def rewrite_pragma(source: str, loop: Loop, new: str) -> str | None:
    """Source with the loop's last omp pragma line replaced by `new`; None if it has none."""
    data = source.encode()
    lines = data.split(b"\n")
    col = loop.start - (data.rfind(b"\n", 0, loop.start) + 1)
    rows = [r for r in _pragma_rows(lines, loop.line, col) if _OMP.match(lines[r].decode(errors="replace"))]
    if not rows or lines[rows[-1]].rstrip().endswith(b"\\"):
        return None
    lines[rows[-1]] = re.match(rb"[ \t]*", lines[rows[-1]]).group() + new.strip().encode()  # type: ignore[union-attr]
    return b"\n".join(lines).decode()
