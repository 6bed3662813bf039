"""Loop analysis of C kernels with tree-sitter-c: find `for` loops, their OpenMP shape, insert pragmas.

`analyze(source)` returns every `for` inside a function body (preorder) with what the tuner needs to
place `#pragma omp parallel for` / `simd`: canonical form, nesting, reductions (scalars, and arrays
only updated as `X[idx] += e` / `X[idx]++` at a data-dependent idx, like a histogram's bins) and
privates, existing pragmas, and hints for the prior (triangular or indirect bounds, obvious
recurrences). Pragmas are read from and inserted into the text, so the rest of the source is kept
byte for byte.
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
_INT_TYPEDEF = re.compile(r"^(u?int\w*_t|size_t|ssize_t|ptrdiff_t)$")
_OMP = re.compile(r"^\s*#\s*pragma\s+omp\b")
_PRAGMA_LINE = re.compile(rb"(?m)^[ \t]*#[ \t]*pragma\b.*$")
_IDENT = r"(?<![\w.])[A-Za-z_]\w*"
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
    canonical: bool  # OpenMP canonical form over an integer/pointer; no break/return/goto leaves the body
    inner_var: str | None  # perfectly nested: the body is one canonical `for` (no pragma) whose header ignores var
    innermost: bool
    pragmas: tuple[str, ...]  # `#pragma` lines directly before the loop
    enclosing_omp: tuple[str, ...]  # omp pragmas on enclosing statements
    inner_omp: tuple[str, ...]  # omp pragma lines inside the body
    collapsed: bool  # part of an enclosing loop's collapse(k) nest
    reductions: tuple[tuple[str, str], ...]  # (operator, variable)
    # (operator, array, extent): OpenMP 4.5 `reduction(op:array[:extent])`, extent "" for a whole local array of
    # constant size (`reduction(op:array)`); see _array_reductions
    array_reductions: tuple[tuple[str, str, str], ...]
    private: tuple[str, ...]  # outer variables assigned before any use in each iteration
    shared: tuple[str, ...]  # other outer scalars written in the body (a race or a scalar recurrence)
    triangular: bool  # a nested loop's bounds depend on var
    indirect: bool  # loop bounds read from arrays (CSR-like)
    recurrence: bool  # an array is written and read at textually different subscripts
    # var is used in the body other than modulo a constant: a time-step loop's is not, nor one that only picks
    # rotating buffers with it (`lev[(t + 2) % 3]`, `t % 2`): its iterations reuse the same memory
    uses_var: bool
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
        """May take a new `parallel for`: canonical, no pragma on it (gcc allows one loop pragma), no
        OpenMP construct around it, no parallel region inside it."""
        return (self.canonical and not self.pragmas and not self.enclosing_omp
                and not any("parallel" in p for p in self.inner_omp))

    @property
    def simdable(self) -> bool:
        """May take a new `simd`: innermost, canonical, no pragma on it, no omp inside, not inside a simd."""
        return (self.innermost and self.canonical and not self.pragmas and not self.inner_omp
                and not self.collapsed and not any("simd" in p for p in self.enclosing_omp))


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


def _is(node: ts.Node | None, name: str) -> bool:
    return node is not None and node.type == "identifier" and _text(node) == name


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


def _decl_name(node: ts.Node | None) -> str:
    while node is not None and node.type != "identifier":
        node = _field(node, "declarator")
    return _text(node)


def _type_kind(ty: ts.Node | None) -> str:
    """'int' or 'float' for arithmetic types, 'scalar' for anything else (structs, unknown typedefs)."""
    if ty is not None and (ty.type in ("primitive_type", "sized_type_specifier") or _INT_TYPEDEF.match(_text(ty))):
        return "float" if {"float", "double", "_Complex"} & set(_text(ty).split()) else "int"
    return "scalar"


def _declarations(root: ts.Node, at: int) -> dict[str, str]:
    """Names in scope at byte `at` -> 'int' | 'float' | 'scalar' | 'pointer' | 'array' (last one wins)."""
    return {name: kind for name, (kind, _) in _declared(root, at).items()}


def _declared(root: ts.Node, at: int) -> dict[str, tuple[str, str]]:
    """Names in scope at byte `at` -> (kind as in _declarations, element kind): the element kind is
    _type_kind of the declared type for a one-level pointer (`int64_t *h`) or a one-dimensional array,
    '' for deeper ones (`double **p`, `a[3][4]`) and for non-pointers."""
    kinds: dict[str, tuple[str, str]] = {}
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
            inner = _field(node, "declarator")
            one_level = inner is not None and inner.type == "identifier"
            element = _type_kind(_field(d, "type")) if kind in ("pointer", "array") and one_level else ""
            if kind:
                kinds[_decl_name(node)] = (kind, element)
    return kinds


def _loop_var(loop: ts.Node, kinds: dict[str, str]) -> tuple[str | None, str]:
    """The loop variable set by the initializer and its kind."""
    init = _field(loop, "initializer")
    if init is not None and init.type == "declaration":
        decls = [c for c in init.named_children if c.type == "init_declarator"]
        node = _field(decls[0], "declarator") if len(decls) == 1 else None
        if node is not None and node.type in ("identifier", "pointer_declarator"):
            return _decl_name(node), "pointer" if node.type != "identifier" else _type_kind(_field(init, "type"))
    elif init is not None and init.type == "assignment_expression" and _text(_field(init, "operator")) == "=":
        left = _field(init, "left")
        if left is not None and left.type == "identifier":
            return _text(left), kinds.get(_text(left), "")
    return None, ""


def _escapes(body: ts.Node) -> bool:
    """Whether the body has a break (not inside a nested loop/switch), a return or a goto."""
    stack = [(c, False) for c in body.children]
    while stack:
        n, nested = stack.pop()
        if n.type in ("return_statement", "goto_statement") or (n.type == "break_statement" and not nested):
            return True
        stack.extend((c, nested or n.type in _NESTING) for c in n.children)
    return False


def _canonical(loop: ts.Node, kinds: dict[str, str]) -> str | None:
    """The variable of an OpenMP canonical loop over an integer or pointer, or None."""
    var, kind = _loop_var(loop, kinds)
    cond, upd, body = _field(loop, "condition"), _field(loop, "update"), _field(loop, "body")
    if var is None or kind not in ("int", "pointer") or cond is None or upd is None or body is None:
        return None
    sides = [_field(cond, "left"), _field(cond, "right")]
    if cond.type != "binary_expression" or _text(_field(cond, "operator")) not in ("<", "<=", ">", ">="):
        return None
    if not any(_is(s, var) for s in sides) or all(var in _names(s) for s in sides):
        return None
    if upd.type == "assignment_expression" and _text(_field(upd, "operator")) not in ("+=", "-="):
        return None
    written = {_text(_target(n)) for n in _walk(body)}
    return var if _is(_target(upd), var) and var not in written and not _escapes(body) else None


def _pragma_rows(lines: list[bytes], row: int, col: int) -> list[int]:
    """Rows of the `#pragma` lines directly above (row, col), top-down; none if code precedes col."""
    if lines[row][:col].strip():
        return []
    rows, r = [], row - 1
    while r >= 0 and (not lines[r].strip() or lines[r].lstrip().startswith((b"#pragma", b"# pragma", b"//"))):
        rows += [r] if lines[r].lstrip().startswith(b"#") else []
        r -= 1
    return rows[::-1]


def _base(node: ts.Node | None) -> str:
    while node is not None and node.type == "subscript_expression":
        node = _field(node, "argument")
    return _text(node) if node is not None and node.type == "identifier" else ""


def _terms(node: ts.Node | None, sign: str = "+") -> list[str]:
    """Additive terms of an index: `i * n + j - 1` -> ['+i*n', '+j', '-1']."""
    op = _text(_field(node, "operator"))
    if node is not None and node.type == "binary_expression" and op in ("+", "-"):
        return _terms(_field(node, "left"), sign) + _terms(_field(node, "right"), sign if op == "+" else "+-"[sign == "+"])
    return [sign + re.sub(r"\s+", "", _text(node))]


def _recurrence(body: ts.Node, var: str | None) -> bool:
    """An array element written in one iteration and read in another (x[i] written, x[i - 1] or x[j] read
    with j < i): the write does not move with var, or the read's index differs from it by a term that
    moves with var (var, locals, inner loops bounded by var), or by a constant along such a term."""
    varying = {var} | {_decl_name(d) for n in _walk(body) if n.type == "declaration"
                       and _field(n.parent, "initializer") != n for d in n.children_by_field_name("declarator")}
    for m in (m for m in _walk(body) if m.type == "for_statement"):
        if varying & (_names(_field(m, "initializer")) | _names(_field(m, "condition"))):
            varying |= {_loop_var(m, {})[0]}

    def dims(n: ts.Node | None) -> list[list[str]]:
        out: list[list[str]] = []
        while n is not None and n.type == "subscript_expression":
            out.insert(0, _terms(_field(n, "index")))
            n = _field(n, "argument")
        return out

    def moves(terms: list[str]) -> bool:
        return bool(set(re.findall(_IDENT, "".join(terms))) & varying)

    # Pointers the body declares from var (`double *yr = y + r * COLS;`): a write through one moves with var even
    # when its subscripts do not (yr[c] is row r's own element).
    # Only `X + var * E` (or `E * var`, `&X[var * E]`) with var once: `y + idx[r] * COLS`, `(r / 2) * COLS`,
    # `lev[(t + 1) % 3]` need not be distinct per iteration.
    moving_bases = {_decl_name(d) for n in _walk(body) if n.type == "declaration" and _field(n.parent, "initializer") != n
                    for d in n.children_by_field_name("declarator")
                    if var is not None and d.type == "init_declarator" and _row_pointer(_field(d, "value"), var)}

    def meets(w: list[list[str]], r: list[list[str]], base_moves: bool) -> bool:
        if len(w) != len(r) or not (base_moves or any(moves(a) for a in w)):
            return True
        for a, b in zip(w, r, strict=True):
            diff = [t for t in a if t not in b] + [t for t in b if t not in a]
            if diff and base_moves and not any(moves(x) for x in w):
                return True  # yr[c] and yr[c - COLS]: the row's extent is unknown, another row may be meant
            if diff and (moves(diff) or (not re.search(_IDENT, "".join(diff)) and moves(a))):
                return True
        return False

    targets = [t for t in (_target(n) for n in _walk(body)) if t is not None and t.type == "subscript_expression"]
    stores = {t.id for t in targets if t.parent is not None and _text(_field(t.parent, "operator")) == "="}
    reads = [n for n in _walk(body) if n.type == "subscript_expression" and _field(n.parent, "argument") != n
             and n.id not in stores]
    return any(_base(w) and _base(w) == _base(r) and meets(dims(w), dims(r), _base(w) in moving_bases)
               for w in targets for r in reads)


def _reduction_op(name: str, occ: list[ts.Node]) -> str | None:
    """The reduction operator if every occurrence of name is part of one kind of reduction update:
    `s += e`, `s *= e`, `s++`, `s = s + e`, `s = fmax(s, e)`, `if (e > s) s = e` (e never reads s)."""
    ops: set[str] = set()
    used: set[int] = set()
    for o in occ:
        if o.id in used or o.parent is None:
            continue
        p, op, parts = o.parent, None, [o]
        kind, right = _text(_field(p, "operator")), _field(p, "right")
        if p.type == "update_expression":
            op = "+"
        elif p.type == "assignment_expression" and _field(p, "left") == o and right is not None:
            if kind in _COMPOUND_OPS and name not in _names(right):
                op = _COMPOUND_OPS[kind]
            elif kind == "=" and right.type == "binary_expression" and _text(_field(right, "operator")) in ("+", "-", "*"):
                rop, rl, rr = _text(_field(right, "operator")), _field(right, "left"), _field(right, "right")
                for mine, other in [(rl, rr)] + ([(rr, rl)] if rop != "-" else []):
                    if mine is not None and _is(mine, name) and name not in _names(other):
                        op, parts = ("*" if rop == "*" else "+"), [o, mine]
                        break
            elif kind == "=" and right.type == "call_expression" and _text(_field(right, "function")) in _MINMAX:
                args = [a for a in (_field(right, "arguments") or right).named_children if a.type != "comment"]
                hits = [a for a in args if _is(a, name)]
                if len(args) == 2 and len(hits) == 1 and name not in _names(next(a for a in args if a != hits[0])):
                    op, parts = _MINMAX[_text(_field(right, "function"))], [o, hits[0]]
        elif p.type == "binary_expression":
            op, parts = _if_max(name, p)
        if op is None:
            return None
        ops.add(op)
        used.update(n.id for n in parts)
    return ops.pop() if len(ops) == 1 else None


def _if_max(name: str, cond: ts.Node) -> tuple[str | None, list[ts.Node]]:
    """`if (e > s) s = e;` (max) or `if (e < s) s = e;` (min): the op and the nodes of s consumed."""
    stmt = cond.parent.parent if cond.parent is not None and cond.parent.type == "parenthesized_expression" else None
    if stmt is None or stmt.type != "if_statement" or _field(stmt, "alternative") is not None:
        return None, []
    op, left, right = _text(_field(cond, "operator")), _field(cond, "left"), _field(cond, "right")
    mine, other = (left, right) if _is(left, name) else (right, left)
    body = _field(stmt, "consequence")
    if body is not None and body.type == "compound_statement" and len(body.named_children) == 1:
        body = body.named_children[0]
    assign = body.named_children[0] if body is not None and body.type == "expression_statement" else None
    if (op not in ("<", ">", "<=", ">=") or mine is None or not _is(mine, name) or name in _names(other)
            or assign is None or assign.type != "assignment_expression" or _text(_field(assign, "operator")) != "="
            or not _is(_field(assign, "left"), name) or _text(_field(assign, "right")) != _text(other)):
        return None, []
    target = _field(assign, "left")
    return ("max" if (op in (">", ">=")) != (mine == left) else "min"), [mine] + ([target] if target else [])


def _assigned_first(name: str, occ: list[ts.Node], body: ts.Node) -> bool:
    """The first occurrence is `name = e` (e without name) and dominates every other occurrence."""
    assign = occ[0].parent
    if assign is None or assign.type != "assignment_expression" or _field(assign, "left") != occ[0] or (
            _text(_field(assign, "operator")) != "=" or name in _names(_field(assign, "right"))):
        return False
    cur = assign
    while cur != body and cur.parent is not None:  # climb while the assignment runs unconditionally
        p = cur.parent
        if not (p.type in ("expression_statement", "compound_statement") or _field(p, "initializer") == cur):
            break
        cur = p
    return all(cur.start_byte <= o.start_byte < cur.end_byte for o in occ)


def _scalars(body: ts.Node | None, var: str | None,
             kinds: dict[str, str]) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    """Reductions, privates and other written variables among the outer-scope variables the body writes."""
    local = {_decl_name(d) for n in _walk(body) if n.type == "declaration"
             for d in n.children_by_field_name("declarator")}
    occ: dict[str, list[ts.Node]] = {}
    for n in _walk(body):
        if n.type == "identifier":
            occ.setdefault(_text(n), []).append(n)
    written = {_text(t) for n in _walk(body) if (t := _target(n)) is not None and t.type == "identifier"}
    reductions: list[tuple[str, str]] = []
    private: list[str] = []
    shared: list[str] = []
    for name in sorted(written - local - {var}):
        op = _reduction_op(name, occ[name]) if kinds.get(name) in ("int", "float") else None
        if op is not None and (op in ("+", "*", "max", "min") or kinds[name] == "int"):  # no bitwise ops on floats
            reductions.append((op, name))
        elif body is not None and kinds.get(name, "array") != "array" and _assigned_first(name, occ[name], body):
            private.append(name)
        else:
            shared.append(name)
    return reductions, private, shared


def _array_reductions(root: ts.Node, loop: ts.Node, var: str | None,
                      declared: dict[str, tuple[str, str]]) -> list[tuple[str, str, str]]:
    """(op, X, extent) for each outer array or pointer X of ints or floats that the body only updates, as
    `X[idx]++`, `X[idx]--`, `X[idx] += e`, `X[idx] -= e` ('+') or another compound assignment (X nowhere
    in e or idx, nor read or written otherwise), where idx is data-dependent (reads an array, calls a
    function, or uses a variable the body computes) or does not use var at all: `hist[bin(x[i])]++` and
    `col[j] += a[i * n + j]` (over i) are reductions, `y[i] += x[i]` is an ordinary parallel write.
    The extent comes from a `for (v = 0; v < EXT; v++) X[v] = ...;` loop in the same function; without
    one X is no reduction (OpenMP needs the section's length, and the private copies cover only it)."""
    body = _field(loop, "body")
    func = next((a for a in _ancestors(loop) if a.type == "function_definition"), None)
    if body is None or var is None or func is None:
        return []
    local = {_decl_name(d) for n in _walk(body) if n.type == "declaration"
             for d in n.children_by_field_name("declarator")}
    inner_vars = {_loop_var(m, {})[0] for m in _walk(body) if m.type == "for_statement"}
    written = {_text(t) for n in _walk(body) if (t := _target(n)) is not None and t.type == "identifier"}
    dependent = (local | written) - inner_vars - {var}
    occ: dict[str, list[ts.Node]] = {}
    for n in _walk(body):
        if n.type == "identifier":
            occ.setdefault(_text(n), []).append(n)
    out: list[tuple[str, str, str]] = []
    for name in sorted(set(occ) - local - {var}):
        kind, element = declared.get(name, ("", ""))
        whole = _local_array(func, name) if kind == "array" else None  # `double sums[K][D];` in the function
        if whole is not None:
            element = whole
        if kind not in ("pointer", "array") or element not in ("int", "float"):
            continue
        op = _array_update_op(name, occ[name], var, dependent)
        if op is None or (op not in ("+", "*") and element != "int"):  # no bitwise ops on floats
            continue
        extent = "" if whole is not None else _extent(root, func, name, declared)
        if extent is not None:
            out.append((op, name, extent))
    return out


def _local_array(func: ts.Node, name: str) -> str | None:
    """The element kind ('int' / 'float' / 'scalar') of `name` when the function's body declares it as an array
    of constant dimensions (literals and #define'd names), of any rank:
    such an array is a whole OpenMP reduction list item (`reduction(+:sums)`, extent ""). None otherwise."""
    body = _field(func, "body")
    root = func
    while root.parent is not None:
        root = root.parent
    defined = set(re.findall(r"(?m)^[ \t]*#[ \t]*define[ \t]+(\w+)", _text(root)))
    for d in _walk(body):
        if d.type != "declaration":
            continue
        for decl in d.children_by_field_name("declarator"):
            node = _field(decl, "declarator") if decl.type == "init_declarator" else decl
            if node is None or node.type != "array_declarator" or _decl_name(node) != name:
                continue
            sizes: list[ts.Node | None] = []
            cur: ts.Node | None = node
            while cur is not None and cur.type == "array_declarator":
                sizes.append(_field(cur, "size"))
                cur = _field(cur, "declarator")
            if cur is None or cur.type != "identifier" or any(
                    z is None or any(m.is_named and m.type not in ("number_literal", "identifier", "binary_expression",
                                                                  "parenthesized_expression") for m in _walk(z))
                    or _names(z) - defined for z in sizes):  # literals and macros only: a variable makes a VLA
                return None
            return _type_kind(_field(d, "type"))
    return None


def _array_update_op(name: str, occ: list[ts.Node], var: str, dependent: set[str]) -> str | None:
    """The one operator of every occurrence of name, if each is the target `name[idx]` of ++/-- or a
    compound assignment whose right side does not read name, with idx data-dependent or free of var."""
    ops: set[str] = set()
    for o in occ:
        up: ts.Node | None = o.parent
        cur = o
        indices: list[ts.Node | None] = []
        while up is not None and up.type == "subscript_expression" and _field(up, "argument") == cur:
            indices.append(_field(up, "index"))  # name[a][b]: both subscripts, outermost target
            cur, up = up, up.parent
        sub, update = cur, up
        if not indices or update is None or _target(update) != sub:
            return None
        if update.type == "update_expression":
            ops.add("+")
        elif _text(_field(update, "operator")) in _COMPOUND_OPS and name not in _names(_field(update, "right")):
            ops.add(_COMPOUND_OPS[_text(_field(update, "operator"))])
        else:
            return None
        for idx in indices:
            data = any(n.type in ("subscript_expression", "call_expression") for n in _walk(idx))
            if var in _names(idx) and not data and not _names(idx) & dependent:
                return None  # x[i] (or x[i * n + j], x[i][j]): iterations write their own elements
    return ops.pop() if len(ops) == 1 else None


def _extent(root: ts.Node, func: ts.Node, name: str, declared: dict[str, tuple[str, str]]) -> str | None:
    """EXT of the first canonical `for (v = 0; v < EXT; v++)` in func whose body stores `name[v] = ...`,
    if every identifier of EXT is in scope at the reduction loop (or a macro or global); else None."""
    in_function = {_decl_name(d) for n in _walk(func) if n.type in ("declaration", "parameter_declaration")
                   for d in n.children_by_field_name("declarator")}
    for m in _walk(func):
        if m.type != "for_statement":
            continue
        v = _canonical(m, _declarations(root, m.start_byte))
        init, cond = _field(m, "initializer"), _field(m, "condition")
        if v is None or init is None or cond is None or _text(_field(cond, "operator")) != "<" \
                or not _is(_field(cond, "left"), v):
            continue
        value = (_field(next((c for c in init.named_children if c.type == "init_declarator"), None), "value")
                 if init.type == "declaration" else _field(init, "right"))
        upd, ext = _field(m, "update"), _field(cond, "right")
        step = _text(_field(upd, "right")) if upd is not None and upd.type == "assignment_expression" else "1"
        if _text(value) != "0" or step != "1" or "-" in _text(_field(upd, "operator")) or v in _names(ext):
            continue
        stores = any(n.type == "assignment_expression" and _text(_field(n, "operator")) == "="
                     and (t := _field(n, "left")) is not None and t.type == "subscript_expression"
                     and _is(_field(t, "argument"), name) and _is(_field(t, "index"), v)
                     for n in _walk(_field(m, "body")))
        if stores and all(x in declared or x not in in_function for x in _names(ext)):
            return " ".join(_text(ext).split())
    return None


def _perfect(n: ts.Node, var: str, kinds: dict[str, str]) -> ts.Node | None:
    """The single canonical loop nested in n whose header does not use var, or None."""
    body = _field(n, "body")
    if body is not None and body.type == "compound_statement":
        stmts = [c for c in body.named_children if c.type != "comment"]
        body = stmts[0] if len(stmts) == 1 else None
    if body is None or body.type != "for_statement" or _canonical(body, kinds) in (None, var):
        return None
    return None if any(var in _names(_field(body, f)) for f in ("initializer", "condition", "update")) else body


def _levels(n: ts.Node) -> int:
    below = [m for m in _walk(_field(n, "body")) if m.type == "for_statement"]
    return 1 + max(_levels(m) for m in below) if below else 0


def parse(data: bytes) -> ts.Tree:
    """The tree of a C source with its `#pragma` lines blanked (same byte offsets): pragmas are read from
    the text, and tree-sitter mis-nests `for (..) #pragma .. for`."""
    return _PARSER.parse(_PRAGMA_LINE.sub(lambda m: b" " * len(m.group()), data))


def analyze(source: str) -> list[Loop]:
    """Every `for` loop inside a function body, in source order."""
    data = source.encode()
    tree = parse(data)
    lines = data.split(b"\n")
    nodes = [n for n in _walk(tree.root_node) if n.type == "for_statement"
             and "function_definition" in (types := {a.type for a in _ancestors(n)}) and "ERROR" not in types]
    index = {n.id: i for i, n in enumerate(nodes)}
    parents = [next((index[a.id] for a in _ancestors(n) if a.id in index), None) for n in nodes]

    def pragmas_of(node: ts.Node) -> tuple[str, ...]:
        return tuple(lines[r].decode(errors="replace").strip() for r in _pragma_rows(lines, *node.start_point))

    def collapsed(i: int) -> bool:
        up, levels = parents[i], 1
        while up is not None:
            m = re.search(r"\bcollapse\s*\(\s*(\d+)", " ".join(p for p in pragmas_of(nodes[up]) if _OMP.match(p)))
            if m and int(m.group(1)) > levels:
                return True
            up, levels = parents[up], levels + 1
        return False

    loops: list[Loop] = []
    for i, n in enumerate(nodes):
        declared = _declared(tree.root_node, n.start_byte)
        kinds = {name: kind for name, (kind, _) in declared.items()}
        canonical = _canonical(n, kinds)
        var, body = canonical or _loop_var(n, kinds)[0], _field(n, "body")
        below = [m for m in _walk(body) if m.type == "for_statement"]
        bounds = [x for m in [n, *below] for x in (_field(m, "initializer"), _field(m, "condition"))]
        # a loop run only under a condition on var (`if (j <= i) for (c ...)`) makes the work per iteration uneven too
        guards = [_field(s, "condition") for s in _walk(body) if s.type == "if_statement"
                  and any(m.type == "for_statement" for m in _walk(_field(s, "consequence")))]
        inner = _perfect(n, canonical, kinds) if canonical else None
        body_text = data[body.start_byte:body.end_byte].decode(errors="replace") if body is not None else ""
        reductions, private, shared = _scalars(body, var, kinds)
        loops.append(Loop(
            index=i, start=n.start_byte, end=n.end_byte, line=n.start_point[0],
            indent=_text_indent(lines[n.start_point[0]]), depth=sum(a.id in index for a in _ancestors(n)),
            parent=parents[i], children=tuple(j for j, p in enumerate(parents) if p == i), var=var,
            canonical=canonical is not None,
            inner_var=_canonical(inner, kinds) if inner is not None and not pragmas_of(inner) else None,
            innermost=not below, pragmas=pragmas_of(n),
            enclosing_omp=tuple(p for a in _ancestors(n) if a.type.endswith("statement")
                                for p in pragmas_of(a) if _OMP.match(p)),
            collapsed=collapsed(i),
            inner_omp=tuple(m.group().strip() for m in re.finditer(r"(?m)^[ \t]*#\s*pragma\s+omp\b.*$", body_text)),
            reductions=tuple(reductions), private=tuple(private), shared=tuple(shared),
            array_reductions=tuple(_array_reductions(tree.root_node, n, var, declared)),
            triangular=var is not None and any(var in _names(x) for x in [*bounds[2:], *guards]),
            indirect=any(s.type == "subscript_expression" for x in bounds for s in _walk(x)),
            recurrence=body is not None and _recurrence(body, var), uses_var=var is not None and _uses(body, var),
            calls=frozenset(_text(_field(s, "function")) for s in _walk(body) if s.type == "call_expression"),
            levels=_levels(n), size=len(body_text.encode())))
    return loops


def _row_pointer(value: ts.Node | None, var: str) -> bool:
    """`X + var * E`, `X + E * var` or `&X[var * E]` (also without `* E`), var occurring once, E free of it."""
    if value is None or [_text(n) for n in _walk(value) if n.type == "identifier"].count(var) != 1:
        return False
    if value.type == "pointer_expression" and _text(_field(value, "operator")) == "&":
        sub = _field(value, "argument")
        value = _field(sub, "index") if sub is not None and sub.type == "subscript_expression" else None
    elif value.type == "binary_expression" and _text(_field(value, "operator")) == "+":
        left, right = _field(value, "left"), _field(value, "right")
        value = right if left is not None and var not in _names(left) else left if right is not None and var not in _names(right) else None
    else:
        return False
    if value is None:
        return False
    if value.type == "identifier":
        return _text(value) == var
    return (value.type == "binary_expression" and _text(_field(value, "operator")) == "*"
            and any(_is(_field(value, side), var) for side in ("left", "right")))


def _uses(body: ts.Node | None, var: str) -> bool:
    """var occurs in body other than inside the left operand of a `% constant` (`t % 3`, `(t + 2) % 3`)."""
    for n in _walk(body):
        if n.type != "identifier" or _text(n) != var:
            continue
        cur, cyclic = n, False
        while cur.parent is not None and cur.parent.type in ("binary_expression", "parenthesized_expression"):
            p = cur.parent
            if p.type == "binary_expression" and _text(_field(p, "operator")) == "%" and _field(p, "left") == cur:
                right = _field(p, "right")
                # modulo a literal or a macro-style constant (`% 3`, `% NLEV`): a ring buffer's `% n` is no time loop
                cyclic = right is not None and (right.type == "number_literal" or right.type == "identifier"
                                                and _text(right).isupper())
                break
            cur = p
        if not cyclic:
            return True
    return False


def _text_indent(line: bytes) -> str:
    return line[: len(line) - len(line.lstrip(b" \t"))].decode()


def insert_pragma(source: str, loop: Loop, pragma: str) -> str:
    """Source with `pragma` on its own line, at the loop's indentation, right before the loop."""
    text = pragma.strip() if pragma.strip().startswith("#") else "#pragma " + pragma.strip()
    data = source.encode()
    line_start = data.rfind(b"\n", 0, loop.start) + 1
    if data[line_start:loop.start].strip():  # code before the `for` on its line: break the line
        return (data[:loop.start] + f"\n{loop.indent}{text}\n{loop.indent}".encode() + data[loop.start:]).decode()
    return (data[:line_start] + f"{loop.indent}{text}\n".encode() + data[line_start:]).decode()


def rewrite_pragma(source: str, loop: Loop, new: str) -> str | None:
    """Source with the loop's last omp pragma line replaced by `new`; None if it has none."""
    data = source.encode()
    lines = data.split(b"\n")
    col = loop.start - (data.rfind(b"\n", 0, loop.start) + 1)
    rows = [r for r in _pragma_rows(lines, loop.line, col) if _OMP.match(lines[r].decode(errors="replace"))]
    if not rows or lines[rows[-1]].rstrip().endswith(b"\\"):
        return None
    lines[rows[-1]] = _text_indent(lines[rows[-1]]).encode() + new.strip().encode()
    return b"\n".join(lines).decode()
