"""Cache tiling of a fully permutable band, decided by dependence analysis (kernopt/tuner/deps.py).

A perfect band of two or three loops (the innermost holding only statements) that isl proves fully
permutable (every dependence distance non-negative on every loop of the band) is tiled: each loop that
carries temporal reuse (some reference stays put along it while another loop moves it: `B[k][j]` along
i) gets a tile loop outside the band, in the band's order, stepping by the tile size; the original loops
become point loops that run within their tile, their bounds clipped with a min written as a conditional:

    for (int ii = 0; ii < n; ii += 64)
        for (int kk = 0; kk < n; kk += 64)
            for (int jj = 0; jj < n; jj += 64)
                for (int i = ii; i < (ii + 64 < n ? ii + 64 : n); i++)
                    for (int k = kk; k < (kk + 64 < n ? kk + 64 : n); k++)
                        for (int j = jj; j < (jj + 64 < n ? jj + 64 : n); j++)
                            C[i][j] += alpha * A[i][k] * B[k][j];

Correct for any n (the last tile is partial). Tiling a fully permutable band keeps every dependence
in order, so each element is updated in the original order (no floating-point reassociation). One
size from a small menu (32, 64, 128) for every tiled loop. A band with fewer than two loops that carry
reuse (a Jacobi step reads each element a few times in neighbouring iterations only) gets no move.

OpenMP: an existing `#pragma omp parallel for` on the band's outer loop stays in front of the outermost
tile loop (the tile loop of that same loop); with `openmp`, a band without pragmas whose outermost tile
loop carries no dependence gets one added. Loop variables declared outside the nest that the point
loops use are then listed in `private(...)`. Rectangular bands counting up by one only; a triangular
band, a band in a collapse(k) nest or with a parallel pragma on an inner loop gets no move. The nest is
re-indented one level per tile loop; everything outside it is kept byte for byte.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kernopt.tuner.cloops import Loop, insert_pragma, rewrite_pragma
from kernopt.tuner.deps import Band, Nest
from kernopt.tuner.loopgen import Header, indent_at, sites, splice, temporal, tile_loop

SIZES = (32, 64, 128)
_PARALLEL_FOR = re.compile(r"#\s*pragma\s+omp\s+parallel\s+for\b")
_PRIVATE = re.compile(r"\bprivate\s*\(([^)]*)\)")


@dataclass(frozen=True)
class Tiling:
    """One proposed tiling: the new source, the band's loops, the tiled ones, the tile size."""

    source: str
    band: tuple[str, ...]
    tiled: tuple[str, ...]
    size: int
    line: int  # 0-based row of the band's outer loop
    parallel: bool  # the outermost tile loop carries no dependence
    pragma: str  # 'kept' (the outer loop's parallel for), 'added', or ''
    assumed: tuple[tuple[str, str], ...]  # pointer pairs assumed not to overlap


def tilings(source: str, sizes: tuple[int, ...] = SIZES, openmp: bool = False) -> list[Tiling]:
    """Every legal tiling of each usable band of two or three loops, one per size."""
    data, loops, taken, found = sites(source)
    out: list[Tiling] = []
    for site in found:
        nest, band, heads = site.nest, site.band, site.heads
        if len(heads) > 3 or not nest.permutable(band):
            continue
        tiled = [p for p, h in enumerate(heads) if temporal(nest, band, h.var)]
        outer = loops.get(heads[0].start)
        if len(tiled) < 2 or outer is None or any(h.type == "" for h in heads):
            continue
        if any(any("parallel" in x for x in loops[h.start].pragmas) for h in heads[1:] if h.start in loops):
            continue
        if outer.pragmas and (tiled[0] != 0 or len(outer.pragmas) != 1 or not _PARALLEL_FOR.match(outer.pragmas[0])
                              or outer.pragmas[0].endswith("\\")):
            continue
        order = (*tiled, *[p for p in range(len(heads)) if p not in tiled])
        parallel = bool((nest.parallel_in(band, order) or [False])[0])
        pragma = "kept" if outer.pragmas else "added" if (openmp and parallel and not outer.enclosing_omp
                                                          and not outer.inner_omp) else ""
        for size in sizes:
            new = _generate(nest, band, heads, tiled, size, data, set(taken), outer, pragma)
            if new is not None:
                out.append(Tiling(new, tuple(h.var for h in heads), tuple(heads[p].var for p in tiled), size,
                                  nest.loops[band.loops[0]].line, parallel, pragma, tuple(sorted(nest.noalias_assumed))))
    return out


def _generate(nest: Nest, band: Band, heads: list[Header], tiled: list[int], size: int, data: bytes, taken: set[str],
              outer: Loop, pragma: str) -> str | None:
    first, second = (nest.loops[i].node for i in band.loops[:2])
    ind0 = indent_at(data, first.start_byte)
    ind1 = indent_at(data, second.start_byte)
    own_line = not data[data.rfind(b"\n", 0, second.start_byte) + 1:second.start_byte].strip()
    unit = ind1[len(ind0):] if own_line and ind1.startswith(ind0) and len(ind1) > len(ind0) else "    "
    tiles, edits = [], []
    for p in tiled:
        h = heads[p]
        tv, clip = tile_loop(h, size, taken)
        tiles.append(f"for ({h.type} {tv} = {h.lo}; {tv} {h.op} {h.bound}; {tv} += {size})")
        edits += clip
    new = splice(data, edits)
    point = new[first.start_byte:first.end_byte + len(new) - len(data)].decode()
    deeper = unit * len(tiles)
    point = "\n".join([ln if k == 0 or not ln.strip() else deeper + ln for k, ln in enumerate(point.split("\n"))])
    text = "".join(t + "\n" + ind0 + unit * (k + 1) for k, t in enumerate(tiles)) + point
    source = (data[:first.start_byte] + text.encode() + data[first.end_byte:]).decode()
    outside = [h.var for h in heads if not h.declared]
    if pragma == "kept":
        line = outer.pragmas[0]
        named = {v.strip() for m in _PRIVATE.finditer(line) for v in m.group(1).split(",")}
        missing = [v for v in outside if v not in named]
        if missing:
            changed = rewrite_pragma(source, outer, f"{line} private({', '.join(missing)})")
            if changed is None:
                return None
            source = changed
    elif pragma == "added":
        source = insert_pragma(source, outer, "#pragma omp parallel for" + (f" private({', '.join(outside)})" if outside else ""))
    return source
