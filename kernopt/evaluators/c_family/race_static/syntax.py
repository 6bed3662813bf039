"""Shapes of C code in the tree-sitter tree that the static race check reads (kernopt/evaluators/c_family/race_static.py):
an expression without its casts and parentheses, the name an assignment targets, a for loop's variable and constant
bounds, a perfectly nested chain of loops, a call's arguments."""

from __future__ import annotations

import re

import tree_sitter as ts

from kernopt.tuner.cloops import _field, _text, _walk

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _strip(node: ts.Node | None) -> ts.Node | None:
    while node is not None and node.type in ("parenthesized_expression", "cast_expression"):
        node = _field(node, "value") if node.type == "cast_expression" else (
            node.named_children[0] if node.named_child_count == 1 else None)
    return node


def _blank(data: bytes, spans: list[tuple[int, int]]) -> bytes:
    b = bytearray(data)
    for s, e in spans:
        b[s:e] = b" " * (e - s)
    return bytes(b)


def _squash(s: str) -> str:
    return re.sub(r"\s+", "", s)


def _target_name(n: ts.Node) -> str:
    t = _field(n, "left") if n.type == "assignment_expression" else (
        _field(n, "argument") if n.type == "update_expression" else None)
    t = _strip(t)
    return _text(t) if t is not None and t.type == "identifier" else ""


def _loop_var(loop: ts.Node) -> str:
    init = _field(loop, "initializer")
    if init is not None and init.type == "declaration":
        ds = init.children_by_field_name("declarator")
        return _text(_field(ds[0], "declarator")) if len(ds) == 1 and ds[0].type == "init_declarator" else ""
    if init is not None and init.type == "assignment_expression":
        left = _field(init, "left")
        return _text(left) if left is not None and left.type == "identifier" else ""
    return ""


def _const_bounds(loop: ts.Node) -> tuple[int | None, int | None, bool]:
    init, cond, upd = _field(loop, "initializer"), _field(loop, "condition"), _field(loop, "update")
    var = _loop_var(loop)
    value = None
    if init is not None and init.type == "declaration":
        ds = init.children_by_field_name("declarator")
        value = _field(ds[0], "value") if ds else None
    elif init is not None:
        value = _field(init, "right")

    def num(n: ts.Node | None) -> int | None:
        n = _strip(n)
        if n is None or n.type != "number_literal":
            return None
        try:
            return int(_text(n).rstrip("uUlL"), 0)
        except ValueError:
            return None
    if cond is None or cond.type != "binary_expression" or _text(_field(cond, "left")) != var or \
            _text(_field(cond, "operator")) not in ("<", "<=") or upd is None or \
            not (upd.type == "update_expression" and "++" in _text(upd)):
        return None, None, False
    return num(value), num(_field(cond, "right")), _text(_field(cond, "operator")) == "<="


def _chain(loop: ts.Node, k: int) -> list[ts.Node] | None:
    out = [loop]
    while len(out) < k:
        body = _field(out[-1], "body")
        while body is not None and body.type == "compound_statement":
            kids = [c for c in body.named_children if c.type != "comment"]
            if len(kids) != 1:
                return None
            body = kids[0]
        if body is None or body.type != "for_statement":
            return None
        out.append(body)
    return out


def _in(n: ts.Node, outer: ts.Node | None) -> bool:
    return outer is not None and outer.start_byte <= n.start_byte < outer.end_byte


def _args(call: ts.Node) -> list[ts.Node]:
    args = _field(call, "arguments")
    return [a for a in args.named_children if a.type != "comment"] if args is not None else []


def _find(root: ts.Node, start: int, end: int, kind: str) -> ts.Node | None:
    for n in _walk(root):
        if n.start_byte == start and n.end_byte == end and n.type == kind:
            return n
    return None


def _root_ident(n: ts.Node | None) -> str:
    n = _strip(n)
    while n is not None and n.type in ("subscript_expression", "field_expression", "pointer_expression", "binary_expression"):
        n = _strip(_field(n, "argument") if n.type != "binary_expression" else _field(n, "left"))
    return _text(n) if n is not None and n.type == "identifier" else ""
