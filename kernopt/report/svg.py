"""Hand-written inline SVG for the report: the best-speedup-over-evaluations step plot, the fast_p
curve and the lineage tree. No plotting library, no script needed to draw them; every text from a
run is escaped here (the callers pass untrusted strings: ideas, reasons, task keys)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape


def esc(value: object) -> str:
    return escape(str(value), quote=True)


def _num(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".") if abs(x - round(x, 1)) < 1e-9 else f"{x:.2f}"


def nice_ticks(hi: float, target: int = 5) -> list[float]:
    """Round tick values from 0 to at least hi (about `target` of them)."""
    hi = max(hi, 1e-9)
    raw = hi / target
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    n = math.ceil(hi / step - 1e-9)
    return [round(i * step, 10) for i in range(n + 1)]


@dataclass
class Point:
    """One evaluated candidate on the progress plot."""

    x: int  # evaluation index (1-based)
    y: float | None  # speedup; None: not timed (failed, or no timing here)
    lo: float | None
    hi: float | None
    cls: str  # status class: faster, ok, wrong_answer, ...
    tip: str
    href: str  # "#anchor"


def progress_plot(points: list[Point], best_so_far: list[float], width: int = 900, height: int = 300) -> str:
    """Step line of the best verified, significant speedup after each evaluation (1.0 = the baseline
    kept), a dot per timed candidate with its 95% interval, a tick on the floor per untimed one."""
    ml, mr, mt, mb = 52, 18, 14, 40
    pw, ph = width - ml - mr, height - mt - mb
    n = max(len(best_so_far) - 1, 1)
    ys = [p.y for p in points if p.y is not None] + best_so_far + [1.0]
    top = max(ys) * 1.12
    his = [min(p.hi, top * 1.6) for p in points if p.hi is not None]
    ticks = nice_ticks(max([top, *his]))
    ymax = ticks[-1]

    def sx(i: float) -> float:
        return ml + pw * i / n

    def sy(v: float) -> float:
        return mt + ph * (1 - min(max(v, 0.0), ymax) / ymax)

    out = [f'<svg class="plot progress" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
           f'height="{height}" role="img" aria-label="best verified speedup over evaluations">']
    for t in ticks:
        out.append(f'<line class="grid" x1="{ml}" x2="{ml + pw}" y1="{sy(t):.1f}" y2="{sy(t):.1f}"/>'
                   f'<text class="tick" x="{ml - 6}" y="{sy(t) + 4:.1f}" text-anchor="end">{_num(t)}×</text>')
    xstep = max(1, math.ceil(n / 12))
    for i in range(0, n + 1, xstep):
        out.append(f'<text class="tick" x="{sx(i):.1f}" y="{mt + ph + 16}" text-anchor="middle">{i}</text>')
    out.append(f'<line class="axis" x1="{ml}" x2="{ml}" y1="{mt}" y2="{mt + ph}"/>'
               f'<line class="axis" x1="{ml}" x2="{ml + pw}" y1="{mt + ph}" y2="{mt + ph}"/>'
               f'<line class="unity" x1="{ml}" x2="{ml + pw}" y1="{sy(1.0):.1f}" y2="{sy(1.0):.1f}"/>'
               f'<text class="label" x="{ml + pw / 2:.1f}" y="{height - 6}" text-anchor="middle">evaluation</text>'
               f'<text class="label" x="14" y="{mt + ph / 2:.1f}" text-anchor="middle" transform="rotate(-90 14 {mt + ph / 2:.1f})">'
               'speedup over the baseline</text>')
    d = [f"M{sx(0):.1f},{sy(best_so_far[0]):.1f}"]
    for i, v in enumerate(best_so_far[1:], 1):
        d.append(f"H{sx(i):.1f}V{sy(v):.1f}")
    d.append(f"H{sx(n):.1f}")
    out.append(f'<path class="step" d="{"".join(d)}"><title>best verified speedup so far</title></path>')
    for p in points:
        tip = esc(p.tip)
        if p.y is None:
            x, y = sx(p.x), mt + ph - 5
            out.append(f'<a href="{esc(p.href)}"><path class="rug st-{esc(p.cls)}" d="M{x - 3:.1f},{y - 3:.1f}l6,6m0,-6l-6,6" '
                       f'data-tip="{tip}" aria-label="{tip}"/></a>')
            continue
        if p.lo is not None and p.hi is not None:
            out.append(f'<line class="ci st-{esc(p.cls)}" x1="{sx(p.x):.1f}" x2="{sx(p.x):.1f}" y1="{sy(p.lo):.1f}" y2="{sy(p.hi):.1f}"/>')
        out.append(f'<a href="{esc(p.href)}"><circle class="pt st-{esc(p.cls)}" cx="{sx(p.x):.1f}" cy="{sy(p.y):.1f}" r="4.5" '
                   f'data-tip="{tip}" aria-label="{tip}"/></a>')
    out.append("</svg>")
    return "".join(out)


def fast_p_curve(speedups: list[float], n_tasks: int, marks: tuple[float, ...] = (1.0, 1.1, 1.5, 2.0),
                 width: int = 760, height: int = 280) -> str:
    """KernelBench's fast_p: the share of all tasks whose best is verified, significant and more than p
    times faster, for p from 0 to past the largest speedup. `speedups`: those tasks' speedups."""
    ml, mr, mt, mb = 52, 18, 14, 40
    pw, ph = width - ml - mr, height - mt - mb
    xmax = max([2.2, *(s * 1.08 for s in speedups)])
    n = max(n_tasks, 1)

    def share(p: float) -> float:
        return sum(1 for s in speedups if s > p) / n

    def sx(v: float) -> float:
        return ml + pw * v / xmax

    def sy(v: float) -> float:
        return mt + ph * (1 - v)

    out = [f'<svg class="plot fastp" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
           f'height="{height}" role="img" aria-label="fast_p curve">']
    for t in (0, 0.25, 0.5, 0.75, 1.0):
        out.append(f'<line class="grid" x1="{ml}" x2="{ml + pw}" y1="{sy(t):.1f}" y2="{sy(t):.1f}"/>'
                   f'<text class="tick" x="{ml - 6}" y="{sy(t) + 4:.1f}" text-anchor="end">{round(t * 100)}%</text>')
    for t in nice_ticks(xmax, 8):
        if t <= xmax:
            out.append(f'<text class="tick" x="{sx(t):.1f}" y="{mt + ph + 16}" text-anchor="middle">{_num(t)}</text>')
    out.append(f'<line class="axis" x1="{ml}" x2="{ml}" y1="{mt}" y2="{mt + ph}"/>'
               f'<line class="axis" x1="{ml}" x2="{ml + pw}" y1="{mt + ph}" y2="{mt + ph}"/>'
               f'<text class="label" x="{ml + pw / 2:.1f}" y="{height - 6}" text-anchor="middle">threshold p (speedup)</text>'
               f'<text class="label" x="14" y="{mt + ph / 2:.1f}" text-anchor="middle" transform="rotate(-90 14 {mt + ph / 2:.1f})">'
               'tasks verified and faster than p</text>')
    d = [f"M{sx(0):.1f},{sy(share(0)):.1f}"]
    for s in sorted(set(speedups)):
        if s < xmax:
            d.append(f"H{sx(s):.1f}V{sy(share(s)):.1f}")
    d.append(f"H{sx(xmax):.1f}")
    out.append(f'<path class="step" d="{"".join(d)}"/>')
    for i, p in enumerate(marks):
        v = share(p)
        tip = esc(f"fast_{p:g} = {v:.0%} ({sum(1 for s in speedups if s > p)} of {n_tasks} tasks)")
        # labels stacked down from the top, one line each, so close thresholds (1.0, 1.1) do not overlap
        out.append(f'<line class="mark" x1="{sx(p):.1f}" x2="{sx(p):.1f}" y1="{mt}" y2="{mt + ph}"/>'
                   f'<circle class="pt mark-pt" cx="{sx(p):.1f}" cy="{sy(v):.1f}" r="4" data-tip="{tip}" aria-label="{tip}"/>'
                   f'<text class="mark-label" x="{sx(p) + 4:.1f}" y="{mt + 12 + 14 * i:.1f}">fast_{p:g} {v:.0%}</text>')
    out.append("</svg>")
    return "".join(out)


@dataclass
class TreeNode:
    id: str
    label: str  # e.g. "3f2a19c0 1.84×"
    cls: str  # status class
    tip: str
    href: str
    parent: str | None  # None: a root
    best: bool = False  # on the path from the baseline to the best
    orphan: bool = False  # its parent is not in the run: drawn from the root, dashed
    children: list[TreeNode] = field(default_factory=list)


def lineage_tree(nodes: list[TreeNode], row: int = 28, col: int = 160, label_w: int = 190) -> str:
    """The search tree left to right: depth along x, one row per leaf, elbow edges parent -> child.
    `nodes` in evaluation order, the root (the baseline) first."""
    if not nodes:
        return ""
    by_id = {n.id: n for n in nodes}
    root = nodes[0]
    for n in nodes[1:]:
        parent = by_id.get(n.parent or "")
        if parent is None or parent is n:
            n.orphan, parent = True, root
        parent.children.append(n)
    pos: dict[str, tuple[float, float]] = {}
    next_row = 0
    depth_max = 0
    # iterative post-order: a leaf takes the next row, a parent the middle of its children's rows
    stack: list[tuple[TreeNode, int, bool]] = [(root, 0, False)]
    seen: set[str] = set()
    while stack:
        node, depth, expanded = stack.pop()
        if expanded:
            kids = [k for k in node.children if k.id in pos]
            y = (pos[kids[0].id][1] + pos[kids[-1].id][1]) / 2 if kids else next_row
            if not kids:
                next_row += 1
            pos[node.id] = (depth, y)
            depth_max = max(depth_max, depth)
            continue
        if node.id in seen:
            continue
        seen.add(node.id)
        stack.append((node, depth, True))
        stack.extend((k, depth + 1, False) for k in reversed(node.children) if k.id not in seen)
    width = 24 + col * depth_max + label_w
    height = 30 + row * max(next_row, 1)

    def xy(nid: str) -> tuple[float, float]:
        d, r = pos[nid]
        return 16 + col * d, 26 + row * r

    out = [f'<svg class="tree" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
           'role="img" aria-label="lineage tree">']
    for n in sorted(nodes[1:], key=lambda n: n.best):  # the best path last, on top of the edges sharing its first segment
        if n.id not in pos:
            continue
        parent = by_id.get(n.parent or "") if not n.orphan else root
        if parent is None or parent.id not in pos:
            continue
        (px, py), (cx, cy) = xy(parent.id), xy(n.id)
        mid = px + col * 0.45
        cls = "edge" + (" best" if n.best and parent.best else "") + (" orphan" if n.orphan else "")
        out.append(f'<path class="{cls}" d="M{px + 7:.1f},{py:.1f}H{mid:.1f}V{cy:.1f}H{cx - 7:.1f}"/>')
    for n in nodes:
        if n.id not in pos:
            continue
        x, y = xy(n.id)
        tip = esc(n.tip)
        # a leaf's label to its right; a parent's above it, clear of the edges leaving it
        tx, ty = (x - 8, y - 12) if n.children else (x + 11, y + 4)
        out.append(f'<a class="node{" best" if n.best else ""}" href="{esc(n.href)}" data-node="{esc(n.id)}">'
                   f'<circle class="st-{esc(n.cls)}" cx="{x:.1f}" cy="{y:.1f}" r="7" data-tip="{tip}" aria-label="{tip}"/>'
                   f'<text x="{tx:.1f}" y="{ty:.1f}">{esc(n.label)}</text></a>')
    out.append("</svg>")
    return "".join(out)
