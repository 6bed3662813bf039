"""Work formulas of a task's [roofline] table: arithmetic of the size `n` and the table's named
constants, parsed with `ast` and evaluated by walking the tree (never eval): numbers, names,
+ - * / ** ^ (both are powers), parentheses and the calls ceil(x), floor(x), min(x, y, ...) and
max(x, y, ...) (a blocked loop's trip count, a triangle's rows), nothing else."""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Iterable, Mapping

ALLOWED = "numbers, n, the table's params, + - * / ** ^, parentheses, ceil, floor, min and max"
MAX_CHARS = 300

_BINARY: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv, ast.Pow: operator.pow}
_UNARY: dict[type[ast.unaryop], Callable[[float], float]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
# name -> (function, least and most arguments)
_CALLS: dict[str, tuple[Callable[..., float], int, int]] = {
    "ceil": (lambda x: float(math.ceil(x)), 1, 1), "floor": (lambda x: float(math.floor(x)), 1, 1),
    "min": (lambda *xs: min(xs), 2, 8), "max": (lambda *xs: max(xs), 2, 8)}


class ExprError(ValueError):
    """A formula that is not allowed or cannot be evaluated (one line)."""


def parse(text: object, names: Iterable[str] = ("n",)) -> ast.expr:
    """The checked syntax tree of `text`; ExprError (one line) for anything outside the grammar."""
    if not isinstance(text, str):
        raise ExprError(f"must be a string (an arithmetic expression of n), not {type(text).__name__}")
    src = text.strip()
    if not src:
        raise ExprError("is empty")
    if len(src) > MAX_CHARS:
        raise ExprError(f"is longer than {MAX_CHARS} characters")
    if "\n" in src or "\r" in src:
        raise ExprError("must be one line")
    try:
        # `^` is a power here (Python would read it as xor, with a lower precedence than `*`).
        tree = ast.parse(src.replace("^", "**"), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise ExprError(f"{src!r} is not an arithmetic expression (allowed: {ALLOWED})") from None
    known = set(names)
    for node in ast.walk(tree.body):
        if isinstance(node, (ast.operator, ast.unaryop, ast.expr_context)):
            continue
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            continue
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            continue
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _CALLS and not node.keywords:
            _, least, most = _CALLS[node.func.id]
            if not least <= len(node.args) <= most or any(isinstance(a, ast.Starred) for a in node.args):
                raise ExprError(f"{node.func.id}() takes {least}{'' if least == most else f'-{most}'} argument(s) in {src!r}")
            continue
        if isinstance(node, ast.Name) and node.id in _CALLS and _is_callee(tree.body, node):
            continue
        if isinstance(node, ast.Name):
            if node.id in known:
                continue
            raise ExprError(f"unknown name {node.id!r} in {src!r} (allowed: {', '.join(sorted(known))})")
        raise ExprError(f"{ast.unparse(node)!r} is not allowed in {src!r} (allowed: {ALLOWED})")
    return tree.body


def _eval(node: ast.expr, values: Mapping[str, float]) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return float(node.value)
    if isinstance(node, ast.Name):
        return float(values[node.id])
    if isinstance(node, ast.UnaryOp):
        return _UNARY[type(node.op)](_eval(node.operand, values))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return _CALLS[node.func.id][0](*(_eval(a, values) for a in node.args))
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, values), _eval(node.right, values)
        out = _BINARY[type(node.op)](left, right)
        if isinstance(out, complex):  # a negative number to a fractional power
            raise ExprError("a negative number raised to a fractional power")
        return out
    raise ExprError(f"{ast.unparse(node)!r} is not allowed")  # parse() let nothing else through


def _is_callee(root: ast.expr, name: ast.Name) -> bool:
    """Whether `name` is the function of a call (ceil in ceil(n/8)), not a value (a bare `ceil`)."""
    return any(isinstance(c, ast.Call) and c.func is name for c in ast.walk(root))


def evaluate(text: str, values: Mapping[str, float]) -> float:
    """The formula's value for `values` (n and the params): a finite float, else ExprError."""
    tree = parse(text, values.keys())
    try:
        out = _eval(tree, values)
    except ZeroDivisionError:
        raise ExprError(f"{text.strip()!r} divides by zero") from None
    except (OverflowError, RecursionError):
        raise ExprError(f"{text.strip()!r} overflows") from None
    if not math.isfinite(out):
        raise ExprError(f"{text.strip()!r} is not finite")
    return out
