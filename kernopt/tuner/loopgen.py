"""Shared pieces of the loop-restructuring moves (unroll-and-jam in agent/unroll.py, tiling in agent/tile.py):
the parts of a counted `for` header as source spans, which perfect bands the code generation handles,
how references reuse data across a loop's iterations, and small text helpers.

Code generation is text surgery on the original bytes: a header's initial value, bound or update is
replaced in place, everything else is copied. Only bands the analysis models (deps.py) and whose loops
count up by one to a bound that no other loop of the band changes (rectangular) are handled.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import tree_sitter as ts

from kernopt.tuner.cloops import Loop, _field, _names, _text, _walk, analyze
from kernopt.tuner.deps import FEW, Access, Band, Nest, Poly, nests
from kernopt.tuner.permute import _header_end, _rectangular, _references, access_stride

_UNSIGNED = re.compile(r"\b(unsigned|size_t|uint\w*_t|uintptr_t)\b")
_SIMPLE = re.compile(r"^[\w\s+\-*/.\[\]]*$")
_ATOM = re.compile(r"^[\w.]+(\[[^\]]*\])*$")


@dataclass(frozen=True)
class Header:
    """`for (TYPE v = LO; v OP BOUND; v++)` or `for (v = LO; ...)`: spans are absolute byte offsets."""

    var: str
    type: str  # the variable's declared type ('' when unknown)
    declared: bool  # declared in the header
    lo: str
    bound: str
    op: str  # '<' or '<='
    lo_span: tuple[int, int]
    bound_span: tuple[int, int]
    update_span: tuple[int, int]
    cond_span: tuple[int, int]
    start: int  # the `for` keyword
    end: int  # just after the header's `)`
    unsigned: bool  # the variable or a name in the bound is unsigned: no subtraction from the bound


def header(nest: Nest, loop: int) -> Header | None:
    """The header of a loop that counts up by one to `v < B` or `v <= B`; None for any other form."""
    lp = nest.loops[loop]
    node = lp.node
    if lp.step != 1:
        return None
    init, cond, upd = _field(node, "initializer"), _field(node, "condition"), _field(node, "update")
    if init is None or cond is None or upd is None:
        return None
    ty, value, declared = "", None, False
    if init.type == "declaration":
        value = _field(init.children_by_field_name("declarator")[0], "value")
        ty, declared = _text(_field(init, "type")), True
    elif init.type == "assignment_expression":
        value = _field(init, "right")
        decl = _decls(nest).get(lp.var)
        ty = _type_of(decl.node) if decl is not None and decl.node is not None else ""
    op, left, right = _text(_field(cond, "operator")), _field(cond, "left"), _field(cond, "right")
    if value is None or right is None or cond.type != "binary_expression" or op not in ("<", "<=") or _text(left) != lp.var:
        return None
    decls = _decls(nest)
    unsigned = bool(_UNSIGNED.search(ty)) or any(
        d is not None and d.node is not None and _UNSIGNED.search(_type_of(d.node)) for d in map(decls.get, _names(right)))
    return Header(lp.var, ty, declared, _text(value), _text(right), op, (value.start_byte, value.end_byte),
                  (right.start_byte, right.end_byte), (upd.start_byte, upd.end_byte), (cond.start_byte, cond.end_byte),
                  node.start_byte, _header_end(node), unsigned)


def _decls(nest: Nest) -> dict:
    builder = getattr(nest, "_builder", None)
    return builder.decls if builder is not None else {}


def _type_of(decl: ts.Node) -> str:
    return " ".join(_text(c) for c in decl.children if c.type in ("primitive_type", "sized_type_specifier", "type_identifier"))


def usable_band(nest: Nest, band: Band, fixed_starts: set[int]) -> list[Header] | None:
    """The band's headers when code generation handles it: at least two loops, the last one innermost,
    rectangular, every loop counting up by one and able to run more than FEW iterations (not an unroll-and-jam
    remainder), none part of a collapse(k) nest. None otherwise (triangular bands are analysed by deps.py but not
    transformed here)."""
    loops = [nest.loops[i] for i in band.loops]
    if len(loops) < 2 or any(w.type == "for_statement" for w in _walk(_field(loops[-1].node, "body"))):
        return None
    if not _rectangular(nest, band) or any(lp.node.start_byte in fixed_starts for lp in loops):
        return None
    if any(nest.runs_at_most(i, FEW) for i in band.loops):  # an unroll-and-jam remainder's few rows
        return None
    heads = [header(nest, i) for i in band.loops]
    if any(h is None for h in heads):
        return None
    return [h for h in heads if h is not None]


@dataclass(frozen=True)
class Site:
    """A band that code generation handles (usable_band), in the nest the analysis modelled."""

    nest: Nest
    band: Band
    heads: list[Header]


def sites(source: str) -> tuple[bytes, dict[int, Loop], set[str], list[Site]]:
    """What the moves start from: the source's bytes, its loops by start offset (cloops.analyze), the
    identifiers it uses, and every usable band of each nest the analysis models (distinct pointer
    parameters assumed not to overlap; each nest's noalias_assumed names the pairs)."""
    data = source.encode()
    loops = {lp.start: lp for lp in analyze(source)}
    fixed = {s for s, lp in loops.items() if lp.collapsed or any("collapse" in p for p in lp.pragmas)}
    found: list[Site] = []
    for nest in nests(source, assume_noalias=True):
        if not nest.known:
            continue
        for band in nest.bands():
            heads = usable_band(nest, band, fixed)
            if heads is not None:
                found.append(Site(nest, band, heads))
    return data, loops, identifiers(data), found


def shifted(p: Poly, var: str, by: int) -> Poly:
    """The polynomial with `var` replaced by `var + by` (var appears at most once per monomial)."""
    out = dict(p)
    for mono, c in p.items():
        if var in mono:
            rest = list(mono)
            rest.remove(var)
            key = tuple(rest)
            out[key] = out.get(key, 0) + c * by
    return {k: v for k, v in out.items() if v}


def reuse(nest: Nest, band: Band, var: str) -> int:
    """References of the band's innermost statements that reuse data across iterations of `var`: those
    that do not move with it (temporal: `B[k][j]` along i) plus pairs that the next iteration's copy
    meets again (group: `a[i + 1][j]` then `a[i][j]`)."""
    refs = [a for a in _references(nest, band) if a.dims is not None]
    temporal = sum(1 for a in refs if access_stride(a, var) == 0 and _moves(a))
    group = 0
    for a in refs:
        assert a.dims is not None
        if access_stride(a, var) == 0:
            continue
        nxt = tuple(shifted(d, var, 1) for d in a.dims)
        group += any(b.array == a.array and b.dims == nxt for b in refs if b is not a)
    return temporal + group


def _moves(a: Access) -> bool:
    return bool(a.dims) and any(m for d in a.dims or () for m in d)


def temporal(nest: Nest, band: Band, var: str) -> bool:
    """Some reference stays put along `var` while another loop of the band moves it: `var` carries reuse
    that a tile can keep in cache."""
    others = [nest.loops[i].var for i in band.loops if nest.loops[i].var != var]
    return any(access_stride(a, var) == 0 and any(access_stride(a, o) for o in others)
               for a in _references(nest, band) if a.dims is not None)


def tile_loop(h: Header, size: int, taken: set[str]) -> tuple[str, list[tuple[int, int, bytes]]]:
    """A fresh tile variable for the loop (`ii` for `i`, `row_tile` for `row`) and the edits that make its header
    a point loop within one tile: the start becomes the tile variable, the bound `min(tile + size, bound)`
    written as a conditional (so the last, partial tile is right for any bound)."""
    tv = fresh(h.var * 2 if len(h.var) == 1 else f"{h.var}_tile", taken)
    hi = f"{tv} + {size}" if h.op == "<" else f"{tv} + {size - 1}"
    return tv, [(*h.lo_span, tv.encode()), (*h.bound_span, f"({hi} < {paren(h.bound)} ? {hi} : {paren(h.bound)})".encode())]


def paren(text: str) -> str:
    """The expression safe as the left operand of + and - (and on either side of `<` in a conditional)."""
    t = text.strip()
    return t if _SIMPLE.match(t) else f"({t})"


def atom(text: str) -> str:
    """The expression safe as the right operand of `-`: a name, a number or a subscript, else parenthesized."""
    t = text.strip()
    return t if _ATOM.match(t) else f"({t})"


def indent_at(data: bytes, pos: int) -> str:
    line = data[data.rfind(b"\n", 0, pos) + 1:pos]
    return line[:len(line) - len(line.lstrip(b" \t"))].decode()


def fresh(base: str, taken: set[str]) -> str:
    name, k = base, 2
    while name in taken:
        name, k = f"{base}{k}", k + 1
    taken.add(name)
    return name


def splice(data: bytes, edits: list[tuple[int, int, bytes]]) -> bytes:
    """`data` with each (start, end) span replaced; spans must not overlap."""
    for a, b, text in sorted(edits, key=lambda e: -e[0]):
        data = data[:a] + text + data[b:]
    return data


def identifiers(source: bytes) -> set[str]:
    from kernopt.tuner.cloops import parse
    return _names(parse(source).root_node)
