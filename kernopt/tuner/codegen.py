"""C from a checked schedule (kernopt/tuner/schedule.py) through isl's AST generator.

isl builds the loop AST from the schedule tree; this module prints it: `for` nodes as
`for (long ko_c0 = ...; ko_c0 <= ...; ko_c0 += 1)`, isl's min/max/floor-division as macros defined at the
top of the generated block (correct for negative values) and undefined at its end, each statement as the
original statement's C text with its loop variables replaced by the AST's argument expressions (in
parentheses), locals declared inside the loops hoisted to the top of the block (assigned where they were
declared) and private in a parallel loop, and the schedule's parallel marks as `#pragma omp parallel for`
on the loops they cover. Anything it cannot print exactly gives no code (None): "don't know", no move.
"""

from __future__ import annotations

import time

import islpy as isl
import tree_sitter as ts

from kernopt.tuner.model import _param
from kernopt.tuner.schedule import _WRAP, PARALLEL, Model, Scheduled, models, options_space, same_order, schedule

BUDGET_S = 20.0  # the most time scheduled_sources spends on one kernel: what is left after it is "don't know"

_MACROS = {
    "KOS_FLOORD": "#define KOS_FLOORD(a, b) ((a) < 0 ? -((-(a) + (b) - 1) / (b)) : (a) / (b))",
    "KOS_MIN": "#define KOS_MIN(a, b) ((a) < (b) ? (a) : (b))",
    "KOS_MAX": "#define KOS_MAX(a, b) ((a) > (b) ? (a) : (b))",
}
_ITER = "ko_c"
_BINARY = {"add": "+", "sub": "-", "mul": "*", "div": "/", "pdiv_q": "/", "pdiv_r": "%", "zdiv_r": "%",
           "and_": "&&", "and_then": "&&", "or_": "||", "or_else": "||", "eq": "==", "le": "<=", "lt": "<",
           "ge": ">=", "gt": ">"}


_OPS = {getattr(isl.ast_expr_op_type, n): n for n in dir(isl.ast_expr_op_type) if not n.startswith("_")}
_IF, _FOR = isl.ast_node_type.if_, isl.ast_node_type.for_  # type: ignore[attr-defined]  # names the stubs lack


class Unprintable(Exception):
    """Something in the AST this printer does not print exactly."""


def _param_names(model: Model) -> dict[str, str]:
    """isl's parameter names (model.py: `p_n`, a product `p_m_X_n`, a quotient `p__Q_0`) -> the C expression
    (Nest.param_c); a parameter with no C text (a remainder) is left out: unprintable."""
    return {_param(p): c for p in model.nest.params if (c := model.nest.param_c(p)) is not None}


class _Printer:
    def __init__(self, model: Model, source: bytes) -> None:
        self.model = model
        self.params = _param_names(model)
        self.used: set[str] = set()
        self.iters: set[str] = set()
        self.source = source

    # --- expressions ----------------------------------------------------------------------------------------
    def expr(self, e: isl.AstExpr) -> str:
        t = e.get_type()
        if t == isl.ast_expr_type.int:
            v = e.get_val().to_python()
            return f"{v}L" if abs(v) >= 2**31 else str(v)
        if t == isl.ast_expr_type.id:
            name = e.get_id().get_name()
            if name in self.iters:
                return name
            if name in self.params:
                return self.params[name]
            raise Unprintable(f"the name {name}")
        if t != isl.ast_expr_type.op:
            raise Unprintable("an expression")
        op = _OPS.get(e.get_op_type(), "?")
        args = [e.get_op_arg(k) for k in range(e.get_op_n_arg())]
        if op == "minus":
            return f"(-{self.expr(args[0])})"
        if op in ("min", "max"):
            macro = "KOS_MIN" if op == "min" else "KOS_MAX"
            self.used.add(macro)
            out = self.expr(args[0])
            for a in args[1:]:
                out = f"{macro}({out}, {self.expr(a)})"
            return out
        if op == "fdiv_q":
            d = args[1]
            if d.get_type() != isl.ast_expr_type.int or d.get_val().to_python() <= 0:
                raise Unprintable("a floor division by a non-constant")
            self.used.add("KOS_FLOORD")
            return f"KOS_FLOORD({self.expr(args[0])}, {self.expr(d)})"
        if op in ("cond", "select"):
            return f"({self.expr(args[0])} ? {self.expr(args[1])} : {self.expr(args[2])})"
        if op in _BINARY and len(args) == 2:
            return f"({self.expr(args[0])} {_BINARY[op]} {self.expr(args[1])})"
        raise Unprintable(f"the operation {op}")

    # --- nodes --------------------------------------------------------------------------------------------
    def node(self, n: isl.AstNode, ind: str, parallel: str | None = None) -> list[str]:
        """The node's lines; `parallel` is the iterator of the loop a parallel mark above stands for (the loop at that
        schedule depth): the first loops below must be that one (or none: isl drops a loop of one iteration)."""
        t = n.get_type()
        if t == isl.ast_node_type.block:
            kids = n.block_get_children()
            return [line for k in range(kids.n_ast_node()) for line in self.node(kids.get_at(k), ind, parallel)]
        if t == isl.ast_node_type.mark:
            name = n.mark_get_id().get_name()
            if not name.startswith(PARALLEL + "_"):
                raise Unprintable("a mark")
            return self.node(n.mark_get_node(), ind, _ITER + name.removeprefix(PARALLEL + "_"))
        if t == _IF:
            out = [f"{ind}if ({self.expr(n.if_get_cond())}) {{", *self.node(n.if_get_then_node(), ind + "    ", parallel)]
            if n.if_has_else_node():
                out += [f"{ind}}} else {{", *self.node(n.if_get_else_node(), ind + "    ", parallel)]
            return [*out, f"{ind}}}"]
        if t == _FOR:
            return self.loop(n, ind, parallel)
        if t == isl.ast_node_type.user:
            self.indent = ind
            return [ind + self.statement(n.user_get_expr())]
        raise Unprintable("a node")

    def loop(self, n: isl.AstNode, ind: str, parallel: str | None) -> list[str]:
        it = n.for_get_iterator().get_id().get_name()
        self.iters.add(it)
        init = self.expr(n.for_get_init())
        if parallel is not None and it != parallel:
            raise Unprintable("a parallel mark above another loop than its own")
        if n.for_is_degenerate():
            return [f"{ind}{{", f"{ind}    const long {it} = {init};", *self.node(n.for_get_body(), ind + "    "), f"{ind}}}"]
        cond = n.for_get_cond()
        if cond.get_type() != isl.ast_expr_type.op or _OPS.get(cond.get_op_type(), "?") not in ("le", "lt") or \
                cond.get_op_arg(0).get_type() != isl.ast_expr_type.id or cond.get_op_arg(0).get_id().get_name() != it:
            raise Unprintable("a loop condition not of the form `c <= e`")
        inc = n.for_get_inc()
        if inc.get_type() != isl.ast_expr_type.int or inc.get_val().to_python() <= 0:
            raise Unprintable("a loop step that is not a positive constant")
        before = set(self.stmts_seen) if parallel else set()
        shared_before = set(self.shared_loops)
        body = self.node(n.for_get_body(), ind + "    ")
        op = "<=" if _OPS.get(cond.get_op_type()) == "le" else "<"
        bound = self.expr(cond.get_op_arg(1))  # OpenMP's canonical form: `var op bound`, no parentheses around it
        head = f"{ind}for (long {it} = {init}; {it} {op} {bound}; {it} += {inc.get_val().to_python()}) {{"
        out = [head, *body, f"{ind}}}"]
        if parallel:
            inside = self.stmts_seen - before
            private = sorted({loc.cname for loc in self.model.locals for s in inside if _accesses(self.model, s, loc.obj)} |
                             (self.shared_loops - shared_before))
            clause = f" private({', '.join(private)})" if private else ""
            if _uneven(n.for_get_body(), it):
                step = inc.get_val().to_python()
                clause = (" schedule(dynamic, 16)" if step == 1 else " schedule(dynamic)") + clause
            out.insert(0, f"{ind}#pragma omp parallel for{clause}")
        return out

    stmts_seen: set[str]
    shared_loops: set[str]
    indent = ""

    def statement(self, call: isl.AstExpr) -> str:
        if call.get_type() != isl.ast_expr_type.op or _OPS.get(call.get_op_type(), "?") != "call":
            raise Unprintable("a statement")
        name = call.get_op_arg(0).get_id().get_name()
        unit = self.model.units[name]
        args = [self.expr(call.get_op_arg(k + 1)) for k in range(call.get_op_n_arg() - 1)]
        if len(args) != len(unit.vars):
            raise Unprintable("a statement's arguments")
        subst = {v: a for v, a in zip(unit.vars, args, strict=True) if v != _WRAP}
        self.stmts_seen.add(name)
        node = unit.node
        if unit.block:  # a local's block, as written (its own loops and locals inside it), at the new depth
            self.shared_loops |= _outer_loop_vars(node)
            lines = _substitute(node, subst, {}).split("\n")
            col = len(lines[-1]) - len(lines[-1].lstrip())  # the closing brace's indentation: the block's own
            return "\n".join([lines[0]] + [self.indent + (ln[col:] if ln[:col].strip() == "" else ln.lstrip())
                                            for ln in lines[1:]])
        renamed = {loc.name: loc.cname for loc in self.model.locals if loc.cname != loc.name and _accesses(self.model, name, loc.obj)}
        if node.type == "declaration":  # a hoisted local: assigned here
            d = node.children_by_field_name("declarator")[0]
            target, value = d.child_by_field_name("declarator"), d.child_by_field_name("value")
            if target is None or value is None:
                raise Unprintable("a declaration")
            return f"{renamed.get(_text(target), _text(target))} = {_substitute(value, subst, renamed)};"
        return _substitute(node, subst, renamed)


def _ids(e: isl.AstExpr) -> set[str]:
    """The identifiers in an AST expression."""
    t = e.get_type()
    if t == isl.ast_expr_type.id:
        return {e.get_id().get_name()}
    if t == isl.ast_expr_type.op:
        return {name for k in range(e.get_op_n_arg()) for name in _ids(e.get_op_arg(k))}
    return set()


def _uneven(body: isl.AstNode, it: str) -> bool:
    """Whether the iterations of the loop over `it` do uneven work: a loop inside has a bound on `it` at one end
    only (`for c2 <= c0`: a triangle; a strip `c0 <= c3 <= c0 + 63` has it at both, a clipped one `0 <= c3 <=
    min(63, n - c0 - 1)` none), or a condition comparing `it` with an inner loop's variable guards part of the
    body. A parallel for over such a loop gets a dynamic schedule (a static one gives the thread with the long
    iterations most of the work)."""
    t = body.get_type()
    if t == isl.ast_node_type.block:
        kids = body.block_get_children()
        return any(_uneven(kids.get_at(k), it) for k in range(kids.n_ast_node()))
    if t == isl.ast_node_type.mark:
        return _uneven(body.mark_get_node(), it)
    if t == _IF:
        ids = _ids(body.if_get_cond())  # `c2 <= c0`, not an edge guard `n >= c0 + 2` (the last strip of an unroll)
        return (it in ids and any(x != it and x.startswith(_ITER) for x in ids)) or _uneven(body.if_get_then_node(), it) or \
            (body.if_has_else_node() and _uneven(body.if_get_else_node(), it))
    if t == _FOR:
        if not body.for_is_degenerate() and (it in _ids(body.for_get_init())) != (it in _bound_ids(body.for_get_cond())):
            return True
        return _uneven(body.for_get_body(), it)
    return False


def _bound_ids(cond: isl.AstExpr) -> set[str]:
    """The identifiers of a loop condition's bound (`c <= e`), none where `e` is a min with a constant (a strip of a
    tiled loop clipped at the edge: `c3 <= min(63, n - c0 - 1)` is 64 iterations but in the last tile)."""
    if cond.get_type() != isl.ast_expr_type.op or cond.get_op_n_arg() != 2:
        return _ids(cond)
    bound = cond.get_op_arg(1)
    if bound.get_type() == isl.ast_expr_type.op and _OPS.get(bound.get_op_type()) == "min" and any(
            bound.get_op_arg(k).get_type() == isl.ast_expr_type.int for k in range(bound.get_op_n_arg())):
        return set()
    return _ids(bound)


def _outer_loop_vars(block: ts.Node) -> set[str]:
    """The variables of the loops inside a block that are declared outside their `for` (shared unless made private)."""
    out = set()
    stack = [block]
    while stack:
        n = stack.pop()
        if n.type == "for_statement":
            init = n.child_by_field_name("initializer")
            if init is not None and init.type == "assignment_expression":
                left = init.child_by_field_name("left")
                if left is not None:
                    out.add(_text(left))
        stack.extend(n.children)
    return out


def _accesses(model: Model, unit: str, obj: str) -> bool:
    return any("A_" + _safe(a.array) == obj for st in model.units[unit].stmts for a in st.accesses)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name)


def _text(node: ts.Node) -> str:
    return (node.text or b"").decode()


def _substitute(node: ts.Node, subst: dict[str, str], renamed: dict[str, str]) -> str:
    """The node's text with every identifier naming a loop variable replaced by (its expression), and each renamed
    local by its new name."""
    base = node.start_byte
    text = node.text or b""
    edits = []
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type == "identifier" and _text(n) in subst:
            edits.append((n.start_byte - base, n.end_byte - base, f"({subst[_text(n)]})".encode()))
        elif n.type == "identifier" and _text(n) in renamed:
            edits.append((n.start_byte - base, n.end_byte - base, renamed[_text(n)].encode()))
        stack.extend(n.children)
    for a, b, new in sorted(edits, reverse=True):
        text = text[:a] + new + text[b:]
    return text.decode()


def generate(s: Scheduled, source: str) -> str | None:
    """The C text that replaces the model's region, or None where something cannot be printed exactly."""
    model = s.model
    if any(m in source for m in _MACROS) or _ITER in source:
        return None
    ctx = s.schedule.get_ctx()
    try:
        build = isl.AstBuild.from_context(isl.Set.read_from_str(ctx, "{ : }"))
        ids = isl.IdList.alloc(ctx, 0)
        for k in range(24):
            ids = ids.add(isl.Id(f"{_ITER}{k}", context=ctx))
        build = build.set_iterators(ids)
        ast = build.node_from_schedule(s.schedule)
    except isl.Error:
        return None
    data = source.encode()
    line_start = data.rfind(b"\n", 0, model.start) + 1
    ind = " " * (model.start - line_start) if data[line_start:model.start].strip() == b"" else "    "
    p = _Printer(model, data)
    p.stmts_seen, p.shared_loops = set(), set()
    try:
        body = p.node(ast, ind + "    ")
    except (Unprintable, isl.Error):
        return None
    out = ["{"]
    out += [_MACROS[m] for m in sorted(p.used)]
    out += [f"{ind}    {loc.ctype} {loc.cname};" for loc in model.locals]
    out += body
    out += [f"#undef {m}" for m in sorted(p.used)]
    out.append(f"{ind}}}")
    return "\n".join(out)


def apply(s: Scheduled, source: str) -> str | None:
    """The source with the model's region replaced by the code of schedule `s`."""
    text = generate(s, source)
    if text is None:
        return None
    data = source.encode()
    return (data[:s.model.start] + text.encode() + data[s.model.end:]).decode()


def scheduled_sources(source: str, openmp: bool, budget_s: float = BUDGET_S) -> list[tuple[Scheduled, str]]:
    """Every model's checked schedules with the source each gives, one per distinct text, within `budget_s`."""
    t0 = time.perf_counter()
    seen: set[str] = set()
    out: list[tuple[Scheduled, str]] = []
    for model in models(source):
        for options in options_space(model, openmp):
            if time.perf_counter() - t0 > budget_s:
                return out
            s = schedule(model, options)
            if s is not None and len(s.notes) == 1 and (model.count == 1 or same_order(s)):
                continue  # nothing but a new order of one nest (a skew with nothing to gain from it), or no new order
            new = apply(s, source) if s is not None else None
            if s is None or new is None or new == source or new in seen:
                continue
            seen.add(new)
            out.append((s, new))
    return out
