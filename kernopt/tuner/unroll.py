"""Unroll-and-jam (register blocking), decided by dependence analysis (kernopt/tuner/deps.py).

In a perfect band whose innermost loop holds only statements (`for i for k for j S`), an outer loop of
the band (i) is unrolled by a factor F (2 or 4) and the F copies of the body are jammed into the
innermost loop, one after another:

    for (int i = 0; i < n - 3; i += 4)            for i, k, j over i-k-j gemm, F = 4
        for (int k = 0; k < n; k++)
            for (int j = 0; j < n; j++) {
                C[i][j] += A[i][k] * B[k][j];
                C[i + 1][j] += A[i + 1][k] * B[k][j];
                ...
            }
    for (int i = n - n % 4; i < n; i++)           the remainder: the original nest for the last n % 4 rows
        ...

`B[k][j]` is then loaded once for four rows. Legal when moving the unrolled loop innermost is a legal
permutation of the band (isl: no dependence distance goes lexicographically negative); then every
dependence keeps its order, so the copies compute exactly what the original computed, in the same
order per element (no floating-point reassociation: the statements are copied verbatim).

Proposed only where the unrolled loop brings reuse (a reference that does not move with it, or one
the next copy meets again: `a[i + 1][j]` then `a[i][j]`). Rectangular bands counting up by one only;
a triangular band gets no move. An `omp parallel for` on the unrolled loop stays on the main loop,
whose bound is written `i < n - 3` (OpenMP's canonical form; the remainder runs serially); where a
name in the bound is unsigned the bound is written `i + 3 < n` and a loop with a pragma is left alone.
Locals declared in the body are renamed in the copies (`t`, `t_1`, ...). Everything outside the band
is kept byte for byte.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import tree_sitter as ts

from kernopt.tuner.cloops import _field, _text, _walk
from kernopt.tuner.deps import Band, Nest
from kernopt.tuner.loopgen import Header, atom, fresh, indent_at, paren, reuse, sites, splice

FACTORS = (2, 4)
_PARALLEL_FOR = re.compile(r"#\s*pragma\s+omp\s+parallel\s+for\b")


@dataclass(frozen=True)
class UnrollJam:
    """One proposed unroll-and-jam: the new source, the unrolled and the innermost loop, the factor."""

    source: str
    var: str
    inner: str
    factor: int
    line: int  # 0-based row of the unrolled loop
    reuse: int  # references reused across the copies
    parallel: bool  # the unrolled loop carries no dependence (the copies are independent)
    assumed: tuple[tuple[str, str], ...]  # pointer pairs assumed not to overlap


def unroll_jams(source: str, factors: tuple[int, ...] = FACTORS) -> list[UnrollJam]:
    """Every legal unroll-and-jam with reuse, for each outer loop of each usable band and each factor."""
    data, loops, taken, found = sites(source)
    out: list[UnrollJam] = []
    for site in found:
        nest, band, heads = site.nest, site.band, site.heads
        d = len(band)
        for p in range(d - 1):
            h = heads[p]
            pragmas = loops[h.start].pragmas if h.start in loops else ()
            if pragmas and (h.unsigned or not all(_PARALLEL_FOR.match(x) and not x.endswith("\\") for x in pragmas)):
                continue
            if h.unsigned and h.lo.strip() != "0":
                continue  # the remainder's start would wrap around for an empty loop
            if not nest.legal_permutation(band, (*[k for k in range(d) if k != p], p)):
                continue
            r = reuse(nest, band, h.var)
            if not r:
                continue
            for f in factors:
                new = _generate(nest, band, p, h, f, data, set(taken))
                if new is not None:
                    out.append(UnrollJam(new.decode(), h.var, heads[-1].var, f, nest.loops[band.loops[p]].line, r,
                                         bool(nest.parallel(band.loops[p])), tuple(sorted(nest.noalias_assumed))))
    return out


def _generate(nest: Nest, band: Band, p: int, h: Header, f: int, data: bytes, taken: set[str]) -> bytes | None:
    unode = nest.loops[band.loops[p]].node
    inner = nest.loops[band.loops[-1]].node
    body = _field(inner, "body")
    if body is None:
        return None
    # the main loop: whole blocks of f iterations, the body jammed f times
    cond = f"{h.var} + {f - 1} {h.op} {paren(h.bound)}" if h.unsigned else f"{h.var} {h.op} {paren(h.bound)} - {f - 1}"
    jam = _jam(data, inner, body, h.var, f, taken)
    if jam is None:
        return None
    main = splice(data, [(*h.cond_span, cond.encode()), (*h.update_span, f"{h.var} += {f}".encode()), jam])
    main = main[unode.start_byte:unode.end_byte + len(main) - len(data)]
    # the remainder: the original loop from the first iteration the main loop did not run
    end = h.bound if h.op == "<" else f"{paren(h.bound)} + 1"
    diff = end if h.lo.strip() == "0" else f"{paren(end)} - {atom(h.lo)}"
    start = f"{paren(end)} - {atom(diff)} % {f}"
    rest = splice(data, [(*h.lo_span, start.encode())])
    rest = rest[unode.start_byte:unode.end_byte + len(rest) - len(data)]
    both = main + b"\n" + indent_at(data, unode.start_byte).encode() + rest
    parent = unode.parent
    if parent is not None and parent.type == "compound_statement":
        return data[:unode.start_byte] + both + data[unode.end_byte:]
    prev = unode.prev_sibling
    if parent is None or prev is None:  # the body of a `for`, `if` or `else` without braces: add them
        return None
    gap = data[prev.end_byte:unode.start_byte]
    if gap.strip():
        return None
    wrapped = b" {" + gap + both + b"\n" + indent_at(data, parent.start_byte).encode() + b"}"
    return data[:prev.end_byte] + wrapped + data[unode.end_byte:]


def _jam(data: bytes, inner: ts.Node, body: ts.Node, var: str, f: int, taken: set[str]) -> tuple[int, int, bytes] | None:
    """The edit that replaces the innermost loop's body by f copies (copy c with var + c)."""
    declared = [_text(_field(d, "declarator") if d.type == "init_declarator" else d)
                for n in _walk(body) if n.type == "declaration" for d in n.children_by_field_name("declarator")]
    if any(not name.isidentifier() for name in declared):
        return None  # an array or pointer declared in the body
    renames = [{name: fresh(f"{name}_{c}", taken) for name in declared} if c else {} for c in range(f)]
    if body.type == "compound_statement":
        close = data.rfind(b"\n", 0, body.end_byte - 1) + 1
        if close > body.start_byte and not data[close:body.end_byte - 1].strip():
            pieces = [_copy(data, body, body.start_byte + 1, close, var, c, renames[c]) for c in range(f)]
            text = b"{" + pieces[0] + b"".join(q[1:] if q.startswith(b"\n") else q for q in pieces[1:]) + data[close:body.end_byte]
        else:
            pieces = [_copy(data, body, body.start_byte + 1, body.end_byte - 1, var, c, renames[c]).strip() for c in range(f)]
            text = b"{ " + b" ".join(pieces) + b" }"
        return body.start_byte, body.end_byte, text
    line_start = data.rfind(b"\n", 0, body.start_byte) + 1
    outer = indent_at(data, inner.start_byte)
    ind = data[line_start:body.start_byte].decode() if not data[line_start:body.start_byte].strip() else outer + "    "
    if declared:
        return None  # `for (...) double t = ...;` is not C
    pieces = [_copy(data, body, body.start_byte, body.end_byte, var, c, renames[c]) for c in range(f)]
    close_paren = [ch for ch in inner.children if ch.type == ")" and ch.end_byte <= body.start_byte][-1]
    text = b" {\n" + b"\n".join(ind.encode() + q for q in pieces) + b"\n" + outer.encode() + b"}"
    return close_paren.end_byte, body.end_byte, text


def _copy(data: bytes, node: ts.Node, a: int, b: int, var: str, c: int, renames: dict[str, str]) -> bytes:
    """data[a:b] with `var` read as `var + c` and the body's locals renamed."""
    if not c:
        return data[a:b]
    edits = []
    for n in _walk(node):
        if n.type != "identifier" or not a <= n.start_byte < b:
            continue
        name = _text(n)
        if name == var:
            edits.append(_fold(n, var, c) or (n.start_byte, n.end_byte, _plus(n, var, c).encode()))
        elif name in renames:
            edits.append((n.start_byte, n.end_byte, renames[name].encode()))
    return splice(data, edits)[a:b + sum(len(t) - (y - x) for x, y, t in edits)]


def _fold(n: ts.Node, var: str, c: int) -> tuple[int, int, bytes] | None:
    """`i - 1` in copy 1 is `i`, `i + 1` is `i + 2`: the constant folded (the same precedence as before)."""
    up = n.parent
    if up is None or up.type != "binary_expression" or _field(up, "left") != n:
        return None
    op, right = _text(_field(up, "operator")), _field(up, "right")
    if op not in ("+", "-") or right is None or right.type != "number_literal" or not _text(right).isdigit():
        return None
    total = c + (int(_text(right)) if op == "+" else -int(_text(right)))
    text = var if not total else f"{var} + {total}" if total > 0 else f"{var} - {-total}"
    outer = up.parent
    if not total and outer is not None and outer.type == "parenthesized_expression":  # `(i - 1) * n`: `i * n`
        return outer.start_byte, outer.end_byte, text.encode()
    return up.start_byte, up.end_byte, text.encode()


def _plus(n: ts.Node, var: str, c: int) -> str:
    """`var + c`, parenthesized unless the context needs no parentheses (`a[i + 1]`, `i + 1 + k`, `i + 1 - k`)."""
    up = n.parent
    bare = f"{var} + {c}"
    if up is None:
        return f"({bare})"
    if up.type in ("parenthesized_expression", "argument_list") or (up.type == "subscript_expression" and _field(up, "index") == n):
        return bare
    if up.type == "binary_expression":
        op = _text(_field(up, "operator"))
        if op == "+" or (op == "-" and _field(up, "left") == n):
            return bare
    return f"({bare})"
