"""The tuner's OpenMP pragma moves, as edits of the kernel's text: `parallel for` on each loop worth it (schedule and
collapse(2) variants, the reduction and private clauses it needs), one move that parallelizes every nest at once,
`simd`, and clause edits on pragmas already there. The order of the parallel-for moves comes from `parallel_prior`.

Every move that makes a loop's iterations run in parallel or in SIMD lanes (`parallel for` and its variants,
collapse(2), `simd`) is offered only on a loop the dependence analysis (deps.py) proves parallel under the clauses
the move writes (its reductions, its private scalars and the arrays the analysis proves privatizable): "don't know"
means no move. Clause edits that only change the schedule of a `parallel for` already there stay.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import tree_sitter as ts

from kernopt.tuner.cloops import Loop, _ancestors, _field, _text, _walk, analyze, insert_pragma, parse, rewrite_pragma
from kernopt.tuner.deps import FEW, declared_names, nests


def parallel_prior(loop: Loop, loops: list[Loop], proven: frozenset[int] = frozenset(),
                   carrying: frozenset[int] = frozenset()) -> float:
    """Loops in deeper nests (more work) first, each nest's outermost good loop before the inner ones.

    Penalized: fork/join per iteration of enclosing loops, an enclosing loop that is itself a good
    candidate, an obvious recurrence (x[i] written, x[j] read) or a shared scalar written (s += x[i];
    out[i] = s), a loop variable unused in the body (a time-step loop) and MPI calls in the body.
    A loop with an array reduction (a histogram's scatter loop) gets a small bonus: it does the work,
    the loop that zeroes the bins beside it (as good and as deep) does not. `proven`: indices of loops the
    dependence analysis proves parallel, good whatever the heuristics above say; `carrying`: indices of loops it
    proves carry a dependence, never good. No fork/join is charged for an enclosing loop in `carrying` or one whose
    variable the body does not use (a time loop): those run serially anyway, and the loop inside is the one to
    parallelize.
    """

    def good(x: Loop) -> bool:
        return x.index in proven or (_good(x) and x.index not in carrying)

    ancestors = []
    up = loops[loop.parent] if loop.parent is not None else None
    while up is not None:
        ancestors.append(up)
        up = loops[up.parent] if up.parent is not None else None
    forks = sum(1 for a in ancestors if a.uses_var and a.index not in carrying)
    score = 100.0 + 20.0 * (loop.depth + loop.levels) - 35.0 * forks + min(loop.size // 500, 4)
    score += 2.0 if loop.array_reductions else 0.0
    score -= 60.0 if any(a.parallelizable and good(a) for a in ancestors) else 0.0
    return score - (0.0 if good(loop) else 50.0) - (60.0 if not loop.uses_var else 0.0)


def _good(loop: Loop) -> bool:
    return (loop.uses_var and not loop.recurrence and not loop.shared
            and not any(c.startswith("MPI_") for c in loop.calls))


def clauses(loop: Loop, collapse: bool = False, live: frozenset[str] = frozenset(), arrays: tuple[str, ...] = ()) -> str:
    """The reduction(...) and private(...) clauses the loop needs (collapse drops the inner variable); a private
    variable in `live` (read after the loop) is lastprivate: after the loop it holds the last iteration's value, as
    it would after the serial loop. Array reductions are OpenMP 4.5 array sections (`reduction(+:hist[:NBINS])`,
    gcc >= 6), or a whole local array of constant size (`reduction(+:sums)` for `double sums[K][D]`). `arrays`: local
    arrays the dependence analysis proves privatizable (Nest.privatizable), private too: a copy per thread (a VLA's
    copy is allocated per thread by the compiler)."""
    parts = []
    ops: dict[str, list[str]] = {}
    for op, var in loop.reductions:
        ops.setdefault(op, []).append(var)
    for op, array, extent in loop.array_reductions:
        ops.setdefault(op, []).append(f"{array}[:{extent}]" if extent else array)  # "": a whole local array
    parts += [f"reduction({op}:{', '.join(vs)})" for op, vs in ops.items()]
    kept = [v for v in loop.private if not (collapse and v == loop.inner_var)] + [a for a in arrays if a not in loop.private]
    last = [v for v in kept if v in live] + [v for v in (loop.var, loop.inner_var if collapse else None)
                                               if v and v in live and v not in kept]
    private = [v for v in kept if v not in live]
    if last:
        parts.append(f"lastprivate({', '.join(last)})")
    if private:
        parts.append(f"private({', '.join(private)})")
    return "".join(" " + p for p in parts)


def _schedules(irregular: bool) -> list[tuple[str, float]]:
    """Schedule clauses with their offset from the plain parallel-for prior."""
    if irregular:
        return [("schedule(dynamic, 16)", 0.0), ("", -4.0), ("schedule(guided)", -6.0), ("schedule(static)", -40.0)]
    return [("", 0.0), ("schedule(static)", -80.0), ("schedule(dynamic, 16)", -84.0), ("schedule(guided)", -88.0)]


Edit = tuple[str | None, float, str, str]  # (new source or None if not applicable, score, idea, Move kind)


def pragma_edits(source: str) -> list[Edit]:
    """parallel for (with schedule / collapse variants), every nest at once, simd, and clause edits on existing
    pragmas, as edits of `source`. The tuner gives the kernel with its own macros expanded (cmacros.expand): the
    clauses are read from the same text the dependence analysis reads (a macro can hide a read or a write)."""
    edits: list[Edit] = []
    loops = analyze(source)
    verdicts = dependence_verdicts(source, loops)
    proven = frozenset(i for i, parallel in verdicts.parallel.items() if parallel)
    carrying = frozenset(i for i, parallel in verdicts.parallel.items() if not parallel)
    priors: dict[int, float] = {}
    data = source.encode()
    tree = parse(data)
    lives = {loop.index: _live(tree, data, loop, loops) for loop in loops}
    for loop in loops:
        where = f"the {loop.var} loop (line {loop.line + 1})"
        # collapse(2) runs the loop inside in parallel too, under this loop's clauses: only where that one is proven
        collapse = loop.index in verdicts.collapse
        live = lives[loop.index]
        if live is None:  # a private the code reads later that the loop may leave unset: no clause makes that right
            continue
        arrays = verdicts.arrays.get(loop.index, ())
        copies = verdicts.copies.get(loop.index, ())
        if loop.parallelizable and loop.index in proven and loop.index not in verdicts.few and copies:
            edits += _copy_edits(source, loop, where, parallel_prior(loop, loops, proven, carrying), live, arrays, copies)
        elif loop.parallelizable and loop.index in proven and loop.index not in verdicts.few:
            priors[loop.index] = parallel_prior(loop, loops, proven, carrying)
            edits += _parallel_edits(source, loop, where, priors[loop.index], collapse, live, arrays)
        elif loop.omp and re.search(r"\bparallel\s+for\b", loop.omp[-1]):
            edits += _clause_edits(source, loop, where, collapse, loop.index in proven)
        if loop.simdable and loop.index in proven and not copies:
            score = 64.0 + (6.0 if loop.reductions else 0.0) - (30.0 if loop.recurrence or loop.shared else 0.0)
            pragma = f"#pragma omp simd{clauses(loop, live=live, arrays=arrays)}"
            edits.append((insert_pragma(source, loop, pragma), score, f"add `{pragma}` on {where}", "compute"))
    edits += _all_proven_edit(source, loops, {i: p for i, p in priors.items() if i in proven},
                              {i: live for i, live in lives.items() if live is not None}, verdicts.arrays)
    return [(new, score, idea, kind) for new, score, idea, kind in edits if new is not None and new != source]


def _live(tree: ts.Tree, data: bytes, loop: Loop, loops: list[Loop]) -> frozenset[str] | None:
    """The names the loop's `parallel for` must leave holding what the serial loop leaves (lastprivate): its private
    variables, and its variable (and the next loop's, for collapse) where declared outside the header, that the code
    may read afterwards (after the loop, earlier in a loop around it, which runs again; a global: anywhere). None
    when such a private is not assigned in every iteration (the last iteration may leave it unset)."""
    node = next((n for n in _walk(tree.root_node) if n.type == "for_statement" and n.start_byte == loop.start), None)
    func = next((a for a in _ancestors(node) if a.type == "function_definition"), None) if node is not None else None
    if node is None or func is None:
        return frozenset()
    own = declared_names(func)
    top = loop
    while top.parent is not None:
        top = loops[top.parent]
    around = data[top.start:loop.start].decode(errors="replace") + data[loop.end:].decode(errors="replace")
    names = [*loop.private] + [v for v in (loop.var, loop.inner_var) if v and _assigned_in_header(data, loops, v, loop)]
    live = frozenset(v for v in names if v not in own or re.search(rf"(?<![\w.>]){re.escape(v)}\b", around))
    body = _field(node, "body")
    if any(v in loop.private and not _every_iteration(body, v) for v in live):
        return None
    return live


def _assigned_in_header(data: bytes, loops: list[Loop], var: str, loop: Loop) -> bool:
    """The loop (or the one right inside it, for its inner variable) sets `var` in its header (`for (i = 0; ...)`):
    declared outside, so the code after the loop can read it."""
    for lp in [loop, *(loops[c] for c in loop.children)]:
        if lp.var == var:
            return re.match(rb"for\s*\(\s*" + re.escape(var.encode()) + rb"\s*=", data[lp.start:lp.end]) is not None
    return False


def _every_iteration(body: ts.Node | None, name: str) -> bool:
    """The first mention of `name` in the body is `name = e`, a statement of the body itself or of blocks in it, or
    the initializer of a loop that is (not under an `if`): every iteration sets it before anything reads it."""
    if body is None:
        return False
    first = min((n for n in _walk(body) if n.type == "identifier" and _text(n) == name), key=lambda n: n.start_byte, default=None)
    assign = first.parent if first is not None else None
    if assign is None or assign.type != "assignment_expression" or _field(assign, "left") != first:
        return False
    cur = assign
    while cur.id != body.id:
        up = cur.parent
        header = up is not None and up.type == "for_statement" and _field(up, "initializer") == cur  # `for (j = 0; ...)`
        if up is None or not (header or up.type in ("expression_statement", "compound_statement")):
            return False
        cur = up
    return True


def _all_proven_edit(source: str, loops: list[Loop], priors: dict[int, float], lives: dict[int, frozenset[str]],
                     arrays: dict[int, tuple[str, ...]]) -> list[Edit]:
    """One move that parallelizes every nest at once (issue 17: kernels of several nests, where single moves
    stack one greedy step at a time): per nest, the best-ranked loop the dependence analysis proves parallel,
    none inside another; only loops worth a move on their own (prior 100 and up: not an inner loop paying a
    fork/join per outer iteration). Ranked just above the best of them; offered only for two or more loops."""
    def related(a: Loop, b: Loop) -> bool:
        return a.start <= b.start < a.end or b.start <= a.start < b.end

    picked: list[Loop] = []
    for i, prior in sorted(priors.items(), key=lambda kv: -kv[1]):
        if prior >= 100.0 and not any(related(loops[i], p) for p in picked):
            picked.append(loops[i])
    if len(picked) < 2:
        return []
    new = source
    what: list[str] = []
    for loop in sorted(picked, key=lambda lp: -lp.start):  # bottom up: the offsets above stay valid
        sched = _schedules(loop.triangular or loop.indirect)[0][0]
        rest = clauses(loop, live=lives.get(loop.index, frozenset()), arrays=arrays.get(loop.index, ()))
        pragma = f"#pragma omp parallel for{' ' + sched if sched else ''}{rest}"
        new = insert_pragma(new, loop, pragma)
        what.insert(0, f"`{pragma}` on the {loop.var} loop (line {loop.line + 1})")
    return [(new, max(priors[lp.index] for lp in picked) + 4.0,
             f"parallelize every nest at once: {'; '.join(what)} (each nest's loop the dependence analysis proves parallel)",
             "other")]


@dataclass
class Verdicts:
    """What the dependence analysis says about the loops (cloops.analyze's, by index): `parallel` True where it proves
    a `parallel for` with the loop's clauses safe, False where the loop carries a dependence through anything else
    (no move); `collapse`: perfect loops whose inner loop is proven parallel under the outer loop's clauses too (a
    collapse(2) is safe); `arrays`: the privatizable arrays a loop's `parallel for` needs private; `few`: loops that
    never run more than FEW iterations a time (an unroll-and-jam remainder, `for (q = 0; q < 3; q++)`), where a
    `parallel for` costs a fork and join and splits nothing worth it. Loops outside the analysis's model are in none
    (and get no move)."""

    parallel: dict[int, bool] = field(default_factory=dict)
    collapse: set[int] = field(default_factory=set)
    arrays: dict[int, tuple[str, ...]] = field(default_factory=dict)
    # privatizable scratch blocks from an allocator: (name, its declaration), run again by each thread (_copy_edits)
    copies: dict[int, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    few: set[int] = field(default_factory=set)


def dependence_verdicts(analysed: str, loops: list[Loop]) -> Verdicts:
    """The analysis of `analysed` (the loops' source with its macros expanded, line for line), matched to the loops
    by line, variable and depth (two loops of one line, variable and depth by their offset, which is theirs where
    `analysed` is the loops' own text; an ambiguous match gets no verdict, and no move)."""
    keyed: dict[tuple[int, str | None, int], list[Loop]] = {}
    for loop in loops:
        keyed.setdefault((loop.line, loop.var, loop.depth), []).append(loop)
    # more overlap only adds dependences; an over-approximated access or bound only adds dependences too
    analysed_nests = nests(analysed, assume_noalias=True, approximate=True)
    # a nest's loop depths count from its top, which is inside a time loop for a sweep (deps.sweeps)
    base = {id(nest): sum(a.type == "for_statement" for a in _ancestors(nest.top)) for nest in analysed_nests}
    seen: dict[tuple[int, str | None, int], int] = {}
    for nest in analysed_nests:
        for info in nest.loops:
            key = (info.line, info.var, info.depth + base[id(nest)])
            seen[key] = seen.get(key, 0) + 1
    out = Verdicts()
    for nest in analysed_nests:
        for info in nest.loops:
            key = (info.line, info.var, info.depth + base[id(nest)])
            match = keyed.get(key, [])
            if len(match) != 1 or seen[key] != 1:  # two loops one key (a macro's loop): the same text tells them apart
                match = [lp for lp in match if lp.start == info.node.start_byte]
                if len(match) != 1:
                    continue
            loop = match[0]
            handled = _handled(loop, nest.written_first(info.index) or frozenset())
            verdict = nest.parallel(info.index, handled)
            if verdict is False:  # with its scratch arrays private, each thread's own
                arrays = tuple(sorted(nest.privatizable(info.index) or ()))
                if arrays and nest.parallel(info.index, handled | frozenset(arrays)):
                    verdict, handled = True, handled | frozenset(arrays)
                    out.arrays[loop.index] = tuple(a for a in arrays if nest.allocation(a) is None)
                    out.copies[loop.index] = tuple((a, text) for a in arrays if (text := nest.allocation(a)) is not None)
            if verdict is not None:
                out.parallel[loop.index] = verdict
            if nest.runs_at_most(info.index, FEW):
                out.few.add(loop.index)
            inner = [x for x in nest.loops if x.parent == info.index]
            if loop.perfect and len(inner) == 1 and nest.parallel(inner[0].index, handled) is True:
                out.collapse.add(loop.index)
    return out


def _handled(loop: Loop, written_first: frozenset[str]) -> frozenset[str]:
    """The objects a `parallel for` on the loop takes care of: its reduction variables, and its private ones that the
    analysis proves written before read in every iteration (`written_first`; lastprivate keeps the value after)."""
    return frozenset([v for _, v in loop.reductions] + [a for _, a, _ in loop.array_reductions]
                     + [v for v in loop.private if v in written_first])


def _parallel_edits(source: str, loop: Loop, where: str, prior: float, collapse: bool = True,
                    live: frozenset[str] = frozenset(), arrays: tuple[str, ...] = ()) -> list[Edit]:
    """A new `parallel for` on the loop: schedule variants and collapse(2) (where `collapse` allows it)."""
    variants = [(f"{' ' + sched if sched else ''}{clauses(loop, live=live, arrays=arrays)}", prior + offset)
                for sched, offset in _schedules(loop.triangular or loop.indirect)]
    if loop.perfect and collapse:
        variants.append((f" collapse(2){clauses(loop, True, live, arrays)}", prior - 6.0))
    return [(insert_pragma(source, loop, f"#pragma omp parallel for{rest}"), score,
             f"add `#pragma omp parallel for{rest}` on {where}", "other") for rest, score in variants]


def _copy_edits(source: str, loop: Loop, where: str, prior: float, live: frozenset[str], arrays: tuple[str, ...],
                copies: tuple[tuple[str, str], ...]) -> list[Edit]:
    """A `parallel for` whose scratch blocks from an allocator are each thread's own: the loop in a parallel region
    that runs the blocks' declarations again (each thread allocates its own block, under the same name) and frees
    them after the work-shared loop (`#pragma omp parallel { double *sum = malloc(...); #pragma omp for ...; free(sum);
    }`). The shared block is no longer touched by the loop (Nest.privatizable: the function reads it nowhere else)."""
    data = source.encode()
    ind = loop.indent
    line_start = data.rfind(b"\n", 0, loop.start) + 1
    start, lead = (line_start, "") if not data[line_start:loop.start].strip() else (loop.start, "\n")
    decls = "".join(f"{ind}    {text.strip()}\n" for _, text in copies)
    frees = "".join(f"{ind}    free({name});\n" for name, _ in copies)
    schedules = _schedules(loop.triangular or loop.indirect)[:2]
    out: list[Edit] = []
    for sched, offset in schedules:
        rest = f"{' ' + sched if sched else ''}{clauses(loop, live=live, arrays=arrays)}"
        block = (f"{lead}{ind}#pragma omp parallel\n{ind}{{\n{decls}{ind}    #pragma omp for{rest}\n{ind}    ".encode()
                 + data[loop.start:loop.end] + f"\n{frees}{ind}}}".encode())
        new = (data[:start] + block + data[loop.end:]).decode()
        names = ", ".join(name for name, _ in copies)
        out.append((new, prior + offset, f"add `#pragma omp for{rest}` on {where} in a parallel region where each thread "
                    f"allocates its own {names}", "other"))
    return out


def _clause_edits(source: str, loop: Loop, where: str, collapse: bool = True, proven: bool = False) -> list[Edit]:
    """Add schedule / collapse (where `collapse` allows it) / simd (where the loop is `proven` parallel) to an existing
    `parallel for` pragma on the loop."""
    line = loop.omp[-1]
    if line.endswith("\\") or "//" in line or "/*" in line:
        return []
    out: list[Edit] = []
    if "schedule" not in line:
        scores = ({"schedule(dynamic, 16)": 78.0, "schedule(guided)": 70.0, "schedule(static)": 40.0}
                  if loop.triangular or loop.indirect else
                  {"schedule(static)": 45.0, "schedule(dynamic, 16)": 44.0, "schedule(guided)": 40.0})
        out += [(rewrite_pragma(source, loop, f"{line} {sched}"), score, f"use {sched} on {where}", "other")
                for sched, score in scores.items()]
    inner_private = loop.inner_var and re.search(rf"private\([^)]*\b{re.escape(loop.inner_var)}\b", line)
    if loop.perfect and collapse and "collapse" not in line and not inner_private:
        out.append((rewrite_pragma(source, loop, f"{line} collapse(2)"), 74.0,
                    f"collapse {where} with the loop inside it (collapse(2))", "other"))
    if loop.innermost and proven and "simd" not in line and not loop.inner_omp:
        simd = re.sub(r"\bparallel\s+for\b", "parallel for simd", line, count=1)
        out.append((rewrite_pragma(source, loop, simd), 60.0 - (30.0 if loop.recurrence or loop.shared else 0.0),
                    f"vectorize {where} as well (parallel for simd)", "compute"))
    return out
