"""Scalar replacement of an in-memory accumulator, with a vectorized reduction, decided by dependence analysis.

People accumulate into the array element (`c[i][j] += alpha * a[i][p] * a[j][p]` over p, `y[j] += A[i][j] * x[i]`
over i). gcc keeps that element in memory across the loop and will not vectorize the sum without reassociation,
which it may not do on its own. This move rewrites an innermost loop whose only statement is `X += E` (or `-=`),
with X the same element in every iteration, as

    { if (LO < B) {  // the loop's own first test: X is touched only if the loop runs, as in the original
        __typeof__(X) acc = X;
        #pragma omp simd reduction(+:acc)
        for (v = LO; v < B; v++) acc += E;
        X = acc;
    } else v = LO; }  // (the else only for a v declared outside the loop, which may be read after it)

Legal (deps.py, isl) when the loop carries no dependence through anything but X's array, and no other access of
that array in E ever touches X's element; loops that count up by one only. The simd reduction reassociates the
sum: the verifier then decides whether the task's tolerance allows it, as for any reduction clause. OpenMP tasks
only (the pragma needs -fopenmp).
"""

from __future__ import annotations

from dataclasses import dataclass

from kernopt.tuner.cloops import _field, _text, analyze
from kernopt.tuner.deps import Nest, nests
from kernopt.tuner.loopgen import header, identifiers


@dataclass(frozen=True)
class Scalarization:
    """One proposed rewrite: the new source, the loop's variable and line, the accumulated element."""

    source: str
    var: str
    line: int  # 0-based row of the loop
    target: str  # the element's text, e.g. `c[i * n + j]`
    assumed: tuple[tuple[str, str], ...]  # pointer pairs assumed not to overlap


def scalarizations(source: str) -> list[Scalarization]:
    """Every innermost loop of the source that accumulates into one element (see the module docstring)."""
    data = source.encode()
    # a pragma on the loop, an omp construct around it or inside it (`#pragma omp atomic` on the sum): not touched
    omp = {lp.start for lp in analyze(source) if lp.pragmas or lp.enclosing_omp or lp.inner_omp}
    taken = identifiers(data)
    out: list[Scalarization] = []
    for nest in nests(source, assume_noalias=True):
        if not nest.known:
            continue
        for lp in nest.loops:
            if any(other.parent == lp.index for other in nest.loops) or lp.node.start_byte in omp:
                continue
            found = _accumulation(nest, lp.index)
            if found is None:
                continue
            target, op, expr = found
            head_parts = header(nest, lp.index)
            if head_parts is None:
                continue  # the guard below needs `for (v = LO; v < B; v++)`
            acc = next(f"{base}{k or ''}" for k in range(100) for base in (f"acc_{lp.var}",) if f"{base}{k or ''}" not in taken)
            node = lp.node
            body = _field(node, "body")
            assert body is not None
            line_start = data.rfind(b"\n", 0, node.start_byte) + 1
            indent = data[line_start:node.start_byte].decode()
            if indent.strip():  # code before the `for` on its line: not handled
                continue
            head = data[node.start_byte:body.start_byte].decode().rstrip()
            pad = indent + "    "
            # X is read and written only when the loop runs at least once, as in the original (X may not exist else);
            # the outer braces keep an `else` after the loop with the `if` it belonged to
            # and a loop variable declared outside it is set as the loop would set it, run or not
            otherwise = "" if head_parts.declared else f" else {lp.var} = {head_parts.lo};"
            block = (f"{{ if (({head_parts.lo}) {head_parts.op} ({head_parts.bound})) {{\n"
                     f"{pad}__typeof__({target}) {acc} = {target};\n{pad}#pragma omp simd reduction(+:{acc})\n"
                     f"{pad}{head}\n{pad}    {acc} {op} {expr};\n{pad}{target} = {acc};\n{indent}}}{otherwise} }}")
            new = (data[:node.start_byte] + block.encode() + data[node.end_byte:]).decode()
            out.append(Scalarization(new, lp.var, lp.line, target, tuple(sorted(nest.noalias_assumed))))
    return out


def _accumulation(nest: Nest, loop: int) -> tuple[str, str, str] | None:
    """(X, op, E) when the loop's body is the one statement `X op= E` (op `+=` or `-=`) and replacing X by a scalar
    is legal; None otherwise."""
    stmts = nest.under(loop)
    if len(stmts) != 1 or stmts[0].loops[-1] != loop:
        return None
    s = stmts[0]
    node = s.node
    body = _field(nest.loops[loop].node, "body")
    inside = [c for c in body.named_children if c.type != "comment"] if body is not None and body.type == "compound_statement" else [body]
    if inside != [node]:
        return None  # the body is more than that statement (an `if` the model folded into the domain, a declaration)
    expr = node.named_children[0] if node.type == "expression_statement" and node.named_child_count == 1 else None
    if expr is None or expr.type != "assignment_expression" or _text(_field(expr, "operator")) not in ("+=", "-="):
        return None
    left, right = _field(expr, "left"), _field(expr, "right")
    if left is None or right is None or left.type != "subscript_expression":
        return None
    writes = [k for k, a in enumerate(s.accesses) if a.write]
    if len(writes) != 1:
        return None
    w = writes[0]
    target = s.accesses[w]
    var = nest.loops[loop].var
    if target.dims is None or any(var in mono for d in target.dims for mono in d):
        return None  # not provably the same element in every iteration
    decl = nest.declaration(target.array.split("@")[0])
    if decl is None or decl.scalar != "float":
        return None  # an integer element: the original truncates at every step, partial sums would not
    if not nest.parallel(loop, frozenset({target.array.split("@")[0]})):
        return None  # a dependence through something else
    for k, a in enumerate(s.accesses):
        if k in (w, w - 1) or a.array != target.array:  # w - 1: the read of `X +=` itself
            continue
        if nest.same_element(s, k, w) is not False:
            return None  # E reads the element (or may)
    return _text(left), _text(_field(expr, "operator")), _text(right)
