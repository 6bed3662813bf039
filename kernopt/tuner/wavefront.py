"""Block wavefront: the parallel schedule of an in-place sweep, decided by dependence analysis (deps.py).

A perfect band (or the inner part of one, under a time loop) whose first two loops both carry a
dependence, and which isl proves fully permutable (every dependence distance non-negative on every
loop: a Gauss-Seidel or SOR sweep reads its upper and left neighbours new and its lower and right ones
old), is cut into S x S tiles over those two loops. A tile needs only tiles above it and to its left,
so the tiles of one anti-diagonal run in parallel, one anti-diagonal after another:

    {
        const long nii = (n - 1 - (1) + 63) / 64, njj = (n - 1 - (1) + 63) / 64;
        for (long w_ = 0; w_ < nii + njj - 1; w_++) {
            #pragma omp parallel for schedule(static)
            for (long b_ = (w_ - njj + 1 > 0 ? w_ - njj + 1 : 0); b_ <= (w_ < nii - 1 ? w_ : nii - 1); b_++) {
                long ii = (1) + b_ * 64;
                long jj = (1) + (w_ - b_) * 64;
                for (int i = ii; i < (ii + 64 < n - 1 ? ii + 64 : n - 1); i++)
                    for (int j = jj; j < (jj + 64 < n - 1 ? jj + 64 : n - 1); j++)
                        ...
            }
        }
    }

Within a tile the points run in the original order, and every dependence keeps its order (the band is
fully permutable), so each element is computed from the same values as before: bit-identical results.
Rectangular bands counting up by one only (loopgen's usable bands); loops with pragmas, inside an OpenMP
construct or with unsigned bounds get no move.
"""

from __future__ import annotations

from dataclasses import dataclass

import tree_sitter as ts

from kernopt.tuner.loopgen import Header, fresh, indent_at, paren, sites, splice, tile_loop

SIZES = (64, 128)


@dataclass(frozen=True)
class Wavefront:
    """One proposed block wavefront: the new source, the two loops, the tile size."""

    source: str
    loops: tuple[str, str]
    size: int
    line: int  # 0-based row of the first of the two loops
    assumed: tuple[tuple[str, str], ...]  # pointer pairs assumed not to overlap


def wavefronts(source: str, sizes: tuple[int, ...] = SIZES) -> list[Wavefront]:
    """Every legal block wavefront over two loops that both carry a dependence, one per tile size."""
    data, loops, taken, found = sites(source)
    out: list[Wavefront] = []
    for site in found:
        nest = site.nest
        for k in range(len(site.band.loops) - 1):  # the band itself, then its inner part under outer loops
            band = nest.band(site.band.loops[k:])
            heads = site.heads[k:]
            if not nest.permutable(band) or (nest.parallel_in(band, tuple(range(len(band)))) or [True])[:2] != [False, False]:
                continue
            first = loops.get(heads[0].start)
            if first is None or first.enclosing_omp or first.inner_omp or any(h.unsigned for h in heads[:2]):
                continue
            if any(loops[h.start].pragmas for h in heads if h.start in loops):
                continue
            for size in sizes:
                new = _generate(data, heads, size, set(taken), nest.loops[band.loops[0]].node)
                out.append(Wavefront(new, (heads[0].var, heads[1].var), size, nest.loops[band.loops[0]].line,
                                     tuple(sorted(nest.noalias_assumed))))
            break  # the outermost part of the band that qualifies
    return out


def _generate(data: bytes, heads: list[Header], size: int, taken: set[str], first_node: ts.Node) -> str:
    h0, h1 = heads[0], heads[1]
    start, end = first_node.start_byte, first_node.end_byte
    ind = indent_at(data, start)
    unit = "    "
    w, b = fresh("w_", taken), fresh("b_", taken)
    t0, clip0 = tile_loop(h0, size, taken)
    t1, clip1 = tile_loop(h1, size, taken)
    new = splice(data, clip0 + clip1)
    point = new[start:end + len(new) - len(data)].decode()
    point = "\n".join([ln if j == 0 or not ln.strip() else unit * 3 + ln for j, ln in enumerate(point.split("\n"))])

    def tiles(h: Header) -> str:
        extra = size - 1 if h.op == "<" else size
        return f"({paren(h.bound)} - ({h.lo}) + {extra}) / {size}"

    ni, nj = fresh(f"n{t0}", taken), fresh(f"n{t1}", taken)
    outside = [h.var for h in heads if not h.declared]
    private = f" private({', '.join(outside)})" if outside else ""
    i1, i2, i3 = ind + unit, ind + unit * 2, ind + unit * 3
    text = (f"{{\n"
            f"{i1}const long {ni} = {tiles(h0)}, {nj} = {tiles(h1)};  /* tiles of {size} along {h0.var} and {h1.var} */\n"
            f"{i1}for (long {w} = 0; {w} < {ni} + {nj} - 1; {w}++) {{  /* one anti-diagonal of tiles after another */\n"
            f"{i2}#pragma omp parallel for schedule(static){private}\n"
            f"{i2}for (long {b} = ({w} - {nj} + 1 > 0 ? {w} - {nj} + 1 : 0); {b} <= ({w} < {ni} - 1 ? {w} : {ni} - 1); {b}++) {{\n"
            f"{i3}long {t0} = ({h0.lo}) + {b} * {size};\n"
            f"{i3}long {t1} = ({h1.lo}) + ({w} - {b}) * {size};\n"
            f"{i3}{point}\n"
            f"{i2}}}\n"
            f"{i1}}}\n"
            f"{ind}}}")
    return (data[:start] + text.encode() + data[end:]).decode()
