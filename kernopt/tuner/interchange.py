"""Loop interchange for stride-1 access: the accumulator nest of matrix products, turned inside out.

The textbook nest keeps a scalar accumulator and runs the reduction loop innermost:

    for (j ...) {                     for (j ...) { OUT = INIT; }
        T s = INIT;                   for (k ...) {
        for (k ...) { s += E; }  ->       for (j ...) { OUT += E; }
        OUT = s;                      }
    }

When E reads an array with a large stride along k (b[k * n + j] in C = A * B) and stride 1 or 0 along
j, the transformed inner loop walks memory contiguously and vectorizes: for gemm on a 2-core VM that
is worth 4-5x before any thread is added. Each element of OUT still sums its terms in the same
order (k ascending, starting from INIT), so the result is the same up to the compiler's own
contraction. The transform is proposed only when it lowers the number of large-stride array
references in the innermost loop; the verifier decides whether it is right.

Applicability (checked on cloops.parse's tree, pragma lines hidden):
the j body is exactly `T s = INIT; for (k ...) { s += E; } OUT = s;` (`+=` or `-=`); neither loop
carries a pragma or belongs to a collapse(k) nest; the k header does not use j or s; E and INIT do not use s; OUT is a subscript
whose index uses j but not k; E does not read OUT's array; E calls no function but pure math ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import tree_sitter as ts

from kernopt.tuner.cloops import (
    _ancestors,
    _base,
    _canonical,
    _declarations,
    _field,
    _names,
    _text,
    _text_indent,
    _walk,
    analyze,
    parse,
)

_PURE = frozenset({"sqrt", "fabs", "exp", "log", "sin", "cos", "tan", "pow", "fma", "fmin", "fmax",
                   "sqrtf", "fabsf", "expf", "logf", "sinf", "cosf", "powf", "fmaf", "fminf", "fmaxf"})
LARGE = 2  # a stride that is neither 0 nor 1 element (a product with the variable, or unknown)


@dataclass(frozen=True)
class Interchange:
    """One applicable interchange: the new source, the two loop variables and the stride gain."""

    source: str
    outer_var: str  # j: the loop that had the accumulator (now innermost)
    inner_var: str  # k: the reduction loop (now outside the j loop)
    line: int  # 0-based row of the j loop
    gain: int  # large-stride references in the innermost loop, before minus after


def stride(index: ts.Node | None, var: str) -> int:
    """0 if `var` is not in the index, 1 if it is a lone additive term (unit stride), else LARGE."""
    if index is None or var not in _names(index):
        return 0
    node = index
    while node.type == "parenthesized_expression" and node.named_child_count == 1:
        node = node.named_children[0]
    if node.type == "identifier":
        return 1
    if node.type == "binary_expression" and _text(_field(node, "operator")) in ("+", "-"):
        left, right = stride(_field(node, "left"), var), stride(_field(node, "right"), var)
        if LARGE in (left, right) or (left and right):
            return LARGE
        if _text(_field(node, "operator")) == "-" and right:  # a - j runs backwards
            return LARGE
        return left or right
    return LARGE


def array_stride(ref: ts.Node, var: str) -> int:
    """Stride of one subscript expression along var: the last subscript is the contiguous one."""
    last = _field(ref, "index")
    outer = _field(ref, "argument")
    earlier = 0
    while outer is not None and outer.type == "subscript_expression":
        earlier = max(earlier, LARGE if var in _names(_field(outer, "index")) else 0)
        outer = _field(outer, "argument")
    return max(earlier, stride(last, var))


def _refs(node: ts.Node | None) -> list[ts.Node]:
    """The outermost subscript expressions under node (a[i][j] once, not also a[i])."""
    return [n for n in _walk(node) if n.type == "subscript_expression"
            and (n.parent is None or n.parent.type != "subscript_expression" or _field(n.parent, "argument") != n)]


def _large(refs: list[ts.Node], var: str) -> int:
    return sum(array_stride(r, var) == LARGE for r in refs)


def _statements(body: ts.Node | None) -> list[ts.Node]:
    if body is None:
        return []
    if body.type != "compound_statement":
        return [body]
    return [c for c in body.named_children if c.type != "comment"]


def _accumulate(stmt: ts.Node, acc: str) -> tuple[str, ts.Node] | None:
    """(`+=` or `-=`, E) for `acc += E;` / `acc -= E;`."""
    if stmt.type != "expression_statement" or stmt.named_child_count != 1:
        return None
    expr = stmt.named_children[0]
    op = _text(_field(expr, "operator"))
    left, right = _field(expr, "left"), _field(expr, "right")
    if expr.type != "assignment_expression" or op not in ("+=", "-=") or _text(left) != acc or right is None:
        return None
    return op, right


def _interchange(source: bytes, root: ts.Node, j_loop: ts.Node, pragmas: set[int]) -> Interchange | None:
    kinds = _declarations(root, j_loop.start_byte)
    jvar = _canonical(j_loop, kinds)
    stmts = _statements(_field(j_loop, "body"))
    if jvar is None or len(stmts) != 3 or j_loop.start_byte in pragmas:
        return None
    decl, k_loop, store = stmts
    if decl.type != "declaration" or k_loop.type != "for_statement" or store.type != "expression_statement":
        return None
    declarators = decl.children_by_field_name("declarator")
    if len(declarators) != 1 or declarators[0].type != "init_declarator":
        return None
    name, init = _field(declarators[0], "declarator"), _field(declarators[0], "value")
    if name is None or name.type != "identifier" or init is None:
        return None
    acc = _text(name)
    kvar = _canonical(k_loop, kinds)
    body = _statements(_field(k_loop, "body"))
    if kvar is None or len(body) != 1 or k_loop.start_byte in pragmas:
        return None
    update = _accumulate(body[0], acc)
    if update is None:
        return None
    op, term = update
    header = {n for f in ("initializer", "condition", "update") for n in _names(_field(k_loop, f))}
    assign = store.named_children[0] if store.named_child_count == 1 else None
    out = _field(assign, "left")
    if (assign is None or assign.type != "assignment_expression" or _text(_field(assign, "operator")) != "="
            or _text(_field(assign, "right")) != acc or out is None or out.type != "subscript_expression"):
        return None
    out_names = _names(out)
    calls = {_text(_field(c, "function")) for c in _walk(term) if c.type == "call_expression"}
    if (jvar in header or acc in header or acc in _names(term) or acc in _names(init) or jvar not in out_names
            or kvar in out_names or acc in out_names or _base(out) in _names(term) or not calls <= _PURE):
        return None
    refs = [*_refs(term), out]
    gain = _large(refs, kvar) - _large(refs, jvar)
    if gain <= 0:
        return None

    def text(a: int, b: int) -> str:
        return source[a:b].decode()

    indent = _text_indent(source.split(b"\n")[j_loop.start_point[0]])
    unit = _text_indent(source.split(b"\n")[decl.start_point[0]])[len(indent):] or "    "
    j_body = _field(j_loop, "body")
    k_body = _field(k_loop, "body")
    assert j_body is not None and k_body is not None
    j_head = text(j_loop.start_byte, j_body.start_byte).rstrip()
    k_head = text(k_loop.start_byte, k_body.start_byte).rstrip()
    lvalue, value, expr = _text(out), _text(init), _text(term)
    new = (f"{j_head} {{\n{indent}{unit}{lvalue} = {value};\n{indent}}}\n"
           f"{indent}{k_head} {{\n{indent}{unit}{j_head} {{\n{indent}{unit}{unit}{lvalue} {op} {expr};\n"
           f"{indent}{unit}}}\n{indent}}}")
    result = source[:j_loop.start_byte] + new.encode() + source[j_loop.end_byte:]
    return Interchange(result.decode(), jvar, kvar, j_loop.start_point[0], gain)


def interchanges(source: str) -> list[Interchange]:
    """Every accumulator nest in the source whose interchange lowers large-stride access, in source order."""
    data = source.encode()
    tree = parse(data)
    # loops that carry a pragma or sit in a collapse(k) nest are left alone (the nest's shape would change)
    pragmas = {loop.start for loop in analyze(source) if loop.pragmas or loop.collapsed}
    out = []
    for node in _walk(tree.root_node):
        if node.type == "for_statement" and any(a.type == "function_definition" for a in _ancestors(node)):
            found = _interchange(data, tree.root_node, node, pragmas)
            if found is not None:
                out.append(found)
    return out
