"""Loop permutation for stride-1 access, decided by dependence analysis (kernopt/tuner/deps.py).

For every perfect band of an affine nest (`for i for j for k S`, each loop's body exactly the next
loop, the innermost holding only statements) the move considers every order of the band's loops that
isl proves legal (every dependence distance stays lexicographically non-negative) and picks the one
whose innermost loop has the fewest large-stride references (then the next loop out, and so on); ties
keep the original order as far as possible and prefer an outermost loop that carries no dependence.
It is proposed only when it lowers the large-stride references of the innermost loop. `C[i][j] +=
A[i][k] * B[k][j]` over i-j-k becomes i-k-j; a `C[i][j] *= beta` nest before it is a nest of its own
and is left as it is.

A band whose bounds use another loop of the band (`for j for (i = j; i < n; i++)`) is permuted only when it
has two loops and one of the two triangles `_triangular_swap` writes (the new bounds by Fourier-Motzkin
elimination on the two loops, without min/max): `i` from `j + c` up to the outer loop's own bound, or from
the outer loop's own start up to `j` or `j + 1`; other shapes keep their order. Loops that carry a pragma or
belong to a collapse(k) nest keep their place. The new source swaps the loops' `for (...)` headers in place
(a triangle's are rewritten): everything else, including the loop bodies, comments and braces, is kept byte
for byte.

The analysis runs with `assume_noalias`: distinct pointer parameters are taken to be distinct arrays
even without `restrict` (the idea says which pairs were assumed; the verifier checks the result).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

import tree_sitter as ts

from kernopt.tuner.cloops import _names, _walk, analyze
from kernopt.tuner.deps import Access, Band, Nest, nests

LARGE = 2  # a stride that is neither 0 nor 1 element


@dataclass(frozen=True)
class Permutation:
    """One proposed reordering of a band: the new source, the loop variables before and after."""

    source: str
    before: tuple[str, ...]
    after: tuple[str, ...]
    line: int  # 0-based row of the band's outermost loop
    gain: int  # large-stride references in the innermost loop, before minus after
    assumed: tuple[tuple[str, str], ...]  # pointer pairs assumed not to overlap
    distributed: str = ""  # the loop split first (its leading statements kept in a copy of their own)


def access_stride(a: Access, var: str) -> int:
    """0, 1 or LARGE: how the access moves in memory when `var` steps by one (last subscript contiguous;
    a flat subscript `i * n + j` is stride 1 along j and large along i)."""
    if a.dims is None:
        return LARGE if _mentions(a.text, var) else 0
    if not a.dims:
        return 0
    *outer, last = a.dims
    if any(var in m for d in outer for m in d):
        return LARGE
    uses = [(m, c) for m, c in last.items() if var in m]
    if not uses:
        return 0
    return 1 if uses == [((var,), 1)] else LARGE


def _mentions(text: str, var: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(var)}(?!\w)", text) is not None


def _references(nest: Nest, band: Band) -> list[Access]:
    """The band's array references, each source reference once (a `+=` target is read and written)."""
    seen: dict[tuple[str, str], Access] = {}
    inner = band.loops[-1]
    for s in nest.stmts:
        if inner in s.loops:
            for a in s.accesses:
                if a.dims is None or a.dims:  # arrays only (scalars never stride)
                    seen.setdefault((a.array, a.text), a)
    return list(seen.values())


def _cost(refs: list[Access], order: list[str]) -> tuple[int, ...]:
    """Large-stride references per loop, innermost first."""
    return tuple(sum(access_stride(a, v) == LARGE for a in refs) for v in reversed(order))


def _header_end(node: ts.Node) -> int:
    body = node.child_by_field_name("body")
    assert body is not None
    close = [c for c in node.children if c.type == ")" and c.end_byte <= body.start_byte]
    return close[-1].end_byte


def _rectangular(nest: Nest, band: Band) -> bool:
    """No band loop's header mentions another band loop's variable."""
    vars_ = {nest.loops[i].var for i in band.loops}
    for i in band.loops:
        node = nest.loops[i].node
        header = [node.child_by_field_name(f) for f in ("initializer", "condition", "update")]
        if any((_names(h) & vars_) - {nest.loops[i].var} for h in header):
            return False
    return True


_HEADER = re.compile(rb"for\s*\(\s*(?P<type>(?:[A-Za-z_]\w*\s+)*?)(?P<var>[A-Za-z_]\w*)\s*=\s*(?P<lo>[^;]+?)\s*;"
                     rb"\s*(?P=var)\s*(?P<op><=?)\s*(?P<hi>[^;]+?)\s*;\s*(?:(?P=var)\s*\+\+|\+\+\s*(?P=var))\s*\)$")


def _offset(text: str, var: str) -> int | None:
    """c when text is `var`, `var + c` or `var - c` (c a decimal literal), else None."""
    m = re.fullmatch(rf"{re.escape(var)}(?:\s*([+-])\s*(\d+))?", text.strip())
    if m is None:
        return None
    return 0 if m.group(1) is None else int(m.group(2)) * (1 if m.group(1) == "+" else -1)


def _plus(text: str, c: int) -> str:
    """text + c, folding a trailing constant (`n - 1` + 1 is `n`)."""
    m = re.fullmatch(r"(.*?[\w)])\s*([+-])\s*(\d+)", text.strip())  # a binary +/- (not `n * -1`)
    if m is not None and not re.search(r"[^\w\s.+\-*]", m.group(1)):  # only + - * before it: the constant is a term
        c += int(m.group(3)) * (1 if m.group(2) == "+" else -1)
        text = m.group(1)
    if c == 0:
        return text
    term = text if re.fullmatch(r"[\w.\s+\-*]+", text) else f"({text})"
    return f"{term} {'+' if c > 0 else '-'} {abs(c)}"


def _triangular_swap(data: bytes, outer: ts.Node, inner: ts.Node) -> tuple[bytes, bytes] | None:
    """The two headers of `for (j = A; j < B; j++) for (i = ...; ...; i++)` interchanged, for the triangles the
    code generation writes (Fourier-Motzkin on two loops, written without min/max):
    `i` from `j + c` (c >= 0) to D with B and D the same text: `for (i = A + c; i < D; i++) for (j = A; j <= i - c; j++)`;
    `i` from A to `j + c` (c in 0..1) with the same A: `for (i = A; i < B + c - 1; i++) for (j = i - c + 1; j < B; j++)`.
    Bounds `<= X` are read as `< X + 1`. Both loops must declare their variable, of the same signed type. None for
    any other shape (the band then keeps its order)."""
    ho = _HEADER.fullmatch(data[outer.start_byte:_header_end(outer)])
    hi = _HEADER.fullmatch(data[inner.start_byte:_header_end(inner)])
    if ho is None or hi is None:
        return None
    j, i = ho["var"].decode(), hi["var"].decode()
    a, b, lo, up = (x.decode().strip() for x in (ho["lo"], ho["hi"], hi["lo"], hi["hi"]))
    if ho["op"] == b"<=":
        b = _plus(b, 1)
    if hi["op"] == b"<=":
        up = _plus(up, 1)
    if _mentions(a, i) or _mentions(b, i) or _mentions(a, j) or _mentions(b, j):
        return None
    ti, tj = hi["type"].decode(), ho["type"].decode()
    # Both variables declared in their headers (their values after the nest would change otherwise), with the
    # same signed type (`j <= i - c` compares them; an unsigned `i - c` wraps).
    if not ti.strip() or " ".join(ti.split()) != " ".join(tj.split()) or re.search(r"\bunsigned\b|\bsize_t\b|\buint", ti):
        return None
    c = _offset(lo, j)
    if c is not None and c >= 0 and not _mentions(up, j) and " ".join(up.split()) == " ".join(b.split()):
        heads = (f"for ({ti}{i} = {_plus(a, c)}; {i} < {up}; {i}++)", f"for ({tj}{j} = {a}; {j} <= {_plus(i, -c)}; {j}++)")
    else:
        c = _offset(up, j)
        if c is None or c not in (0, 1) or _mentions(lo, j) or " ".join(lo.split()) != " ".join(a.split()):
            return None
        last = f"{i} < {b}" if c == 1 else f"{i} + 1 < {b}"  # i < B - 1 written without the subtraction
        heads = (f"for ({ti}{i} = {lo}; {last}; {i}++)", f"for ({tj}{j} = {_plus(i, 1 - c)}; {j} < {b}; {j}++)")
    return heads[0].encode(), heads[1].encode()


def permutations(source: str) -> list[Permutation]:
    """The best legal stride-improving order of each perfect innermost band, in source order."""
    data = source.encode()
    fixed_starts = {lp.start for lp in analyze(source) if lp.pragmas or lp.collapsed}
    # a loop with collapse(k) fixes the k loops it collapses; analyze marks the inner ones `collapsed`
    out: list[Permutation] = []
    for nest in nests(source, assume_noalias=True):
        if not nest.known:
            continue
        for band in nest.bands():
            found = _best(nest, band, data, fixed_starts)
            if found is not None:
                out.append(found)
        for lp in nest.loops:
            found = _distributed(nest, lp.index, data, fixed_starts)
            if found is not None:
                out.append(found)
    return out


def _distributed(nest: Nest, loop: int, data: bytes, fixed_starts: set[int]) -> Permutation | None:
    """Perfectly-nestable: `for j { S; T; for k ... }` with S, T plain statements. Split the j loop into
    `for j { S; T; }` and `for j { for k ... }` where the dependences allow (none from the inner loop's
    statements back to S or T within one iteration of the loops around j), then permute the second
    copy's band: `for j { C[i][j] *= beta; for k C[i][j] += A[i][k] * B[k][j]; }` -> k outside j."""
    node = nest.loops[loop].node
    body = node.child_by_field_name("body")
    if body is None or body.type != "compound_statement" or node.start_byte in fixed_starts:
        return None
    items = [c for c in body.named_children if c.type != "comment"]
    if len(items) < 2 or items[-1].type != "for_statement" or any(c.type != "expression_statement" for c in items[:-1]):
        return None
    inner = items[-1]
    line_start = data.rfind(b"\n", 0, inner.start_byte) + 1
    if data[line_start:inner.start_byte].strip() or data[inner.end_byte:body.end_byte - 1].strip():
        return None
    later = [s for s in nest.stmts if any(nest.loops[i].node == inner for i in s.loops)]
    if not nest.distributable(loop, later):
        return None
    indent = data[data.rfind(b"\n", 0, node.start_byte) + 1:node.start_byte]
    if indent.strip():
        return None
    head = data[node.start_byte:body.start_byte]
    first = head + data[body.start_byte:line_start] + indent + b"}\n" + indent
    second = head + b"{\n" + data[line_start:body.end_byte]
    # The loop as the whole body of a `for`/`if` without braces (`for (i ...) for (j ...) {...}`): its two copies
    # need braces around them, or the second would fall outside the enclosing loop.
    bare = node.parent is not None and node.parent.type != "compound_statement"
    opening = b"{\n" + indent if bare else b""
    new = data[:node.start_byte] + opening + first + second + (b"\n" + indent + b"}" if bare else b"") + data[node.end_byte:]
    at = node.start_byte + len(opening) + len(first)
    for again in nests(new.decode(), assume_noalias=True):
        for band in again.bands() if again.known else []:
            if again.loops[band.loops[0]].node.start_byte == at:
                found = _best(again, band, new, fixed_starts={f for f in fixed_starts if f < node.start_byte})
                if found is not None:
                    return Permutation(found.source, found.before, found.after, nest.loops[loop].line, found.gain,
                                       tuple(sorted(set(found.assumed) | nest.noalias_assumed)), nest.loops[loop].var)
    return None


def _best(nest: Nest, band: Band, data: bytes, fixed_starts: set[int]) -> Permutation | None:
    loops = [nest.loops[i] for i in band.loops]
    if len(loops) < 2 or any(w.type == "for_statement" for w in _walk(loops[-1].node.child_by_field_name("body"))):
        return None  # only bands whose innermost loop is innermost (the stride is decided there)
    swapped: tuple[bytes, bytes] | None = None
    if not _rectangular(nest, band):
        swapped = _triangular_swap(data, loops[0].node, loops[1].node) if len(loops) == 2 else None
        if swapped is None:
            return None
    fixed = {k for k, lp in enumerate(loops) if lp.node.start_byte in fixed_starts}
    names = [lp.var for lp in loops]
    refs = _references(nest, band)
    current = _cost(refs, names)
    choices = []
    for order in itertools.permutations(range(len(loops))):
        if order == tuple(range(len(loops))) or any(order[k] != k for k in fixed):
            continue
        cost = _cost(refs, [names[k] for k in order])
        if cost[0] >= current[0] or not nest.legal_permutation(band, order):
            continue
        par = nest.parallel_in(band, order) or [False]
        moved = sum(1 for a, b in itertools.combinations(order, 2) if a > b)  # inversions: distance from the original
        choices.append((cost, not par[0], moved, order))
    if not choices:
        return None
    cost, _, _, order = min(choices)
    # swap the headers in place, innermost span first so earlier offsets stay valid
    spans = [(lp.node.start_byte, _header_end(lp.node)) for lp in loops]
    heads = list(swapped) if swapped is not None else [data[spans[order[k]][0]:spans[order[k]][1]] for k in range(len(loops))]
    new = data
    for k in reversed(range(len(loops))):
        a, b = spans[k]
        new = new[:a] + heads[k] + new[b:]
    return Permutation(new.decode(), tuple(names), tuple(names[k] for k in order), loops[0].line,
                       current[0] - cost[0], tuple(sorted(nest.noalias_assumed)))
