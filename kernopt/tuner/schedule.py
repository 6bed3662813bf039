"""Schedules from isl's scheduler over the dependence model (issue 27, item 3).

PPCG's path, over deps.py's model: the statements' domains, their memory-based dependences as validity
(every one must hold), proximity (keep reuse close: locality) and coincidence (what may run in parallel),
isl's scheduler, then options applied to the schedule tree: tiling of the outermost permutable band, an
outer coincident member marked parallel, a unit-stride innermost member, unroll-and-jam by strip-mining a
member and unrolling its point loop. Every schedule is checked against the dependences with isl before
code is generated from it (kernopt/tuner/codegen.py); one that fails the check is dropped.

A model is one outermost nest, or a run of consecutive nests of one function body (nothing but comments
and pragmas between them) taken as one: deps.py models the run wrapped in a one-iteration loop, so the
statements are apart, the nests are ordered by that loop's body positions, and the dependences come from
the union of their accesses; fusion and distribution across the nests are then the scheduler's choice.

Locals declared inside the loops (`double s = 0;`) are hoisted by codegen to one variable per name (private
in a parallel loop); the model indexes each by the loops around its declaration, which gives the scheduler
the freedom of an expanded variable, so every schedule is also checked against the dependences of the
variable as it will be: one object, and each instance's accesses inside one iteration of a parallel loop.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

import islpy as isl
import tree_sitter as ts

from kernopt.tuner.cloops import parse
from kernopt.tuner.deps import Nest, Stmt, nests, sweeps

MAX_STMTS = 16  # beyond these the scheduler may take long: "don't know", no move
MAX_DEPTH = 6
MAX_OPERATIONS = 3_000_000  # isl's own operation budget per scheduling (isl_ctx_set_max_operations)
PARALLEL = "omp_parallel"  # the mark codegen turns into `#pragma omp parallel for`: omp_parallel_<schedule depth>
_WRAP = "ko_seq"
_PRAGMA = re.compile(rb"^[ \t]*#[ \t]*pragma\b[^\n]*", re.M)


@dataclass
class Local:
    """A scalar declared inside the modeled loops: hoisted by codegen to one variable of its type."""

    name: str
    ctype: str
    obj: str  # the model's tuple name of its accesses (A_s_123)
    cname: str = ""  # its name in the generated code: `name`, or `name_ko<k>` where two locals share a name


@dataclass
class Unit:
    """What codegen prints for one statement of the schedule: deps.py's statement, or (in a coarse model) the block
    that declares a local, with the loops around it."""

    name: str
    node: ts.Node
    vars: list[str]  # the C loop variables the unit's dimensions are, outermost first
    stmts: list[Stmt]
    block: bool = False


@dataclass
class Model:
    """The dependence model of `count` consecutive nests of function `func`: `data[start:end]` is the source text
    codegen replaces (with the pragmas just before the first nest). The isl objects are kept as text (each schedule
    is computed in a context of its own, with its own options)."""

    func: str
    nest: Nest
    count: int
    start: int
    end: int
    stmts: dict[str, Stmt]
    locals: list[Local] = field(default_factory=list)
    units: dict[str, Unit] = field(default_factory=dict)
    domains: str = ""
    deps: str = ""
    order: str = ""  # the original schedule
    writes: str = ""
    reads: str = ""
    coarse: bool = False  # each local's block one unit (its loops inside it, the local private to it)
    computed: dict[str, str] = field(default_factory=dict)  # isl's schedule for each fusion option, once
    whole_function: bool = False  # the model's nests are all the loop nests of its function

    @property
    def label(self) -> str:
        return f"the {self.count} nests of {self.func}" if self.count > 1 else f"the nest at line {self.line} of {self.func}"

    @property
    def line(self) -> int:
        return self.nest.line + 1


@dataclass(frozen=True)
class Options:
    """One point of the space the search explores."""

    fusion: str = "max"  # "max": isl's default clustering; "min": each strongly connected component apart; "whole"
    tile: int = 0  # tile size for every member of the outermost permutable band (0: no tiling)
    parallel: bool = True  # an outer coincident member as `omp parallel for`
    stride: bool = True  # the innermost band's member with the most stride-1 accesses innermost
    unroll: int = 0  # unroll-and-jam of the outermost band's first member by this factor (0: none)
    wavefront: bool = False  # tile loops skewed (t0 + t1, t1, ...) so that the second runs in parallel
    tile_members: int = 0  # tile only this many outer members of the band (0: all)


@dataclass
class Scheduled:
    """A checked schedule of a model and what it does, in words."""

    model: Model
    options: Options
    schedule: isl.Schedule
    notes: list[str]


def _ctx() -> isl.Context:
    ctx = isl.Context()
    ctx.set_max_operations(MAX_OPERATIONS)
    return ctx


def regions(source: str) -> list[tuple[str, list[ts.Node]]]:
    """Runs of consecutive `for` statements directly in a function body, with only comments and pragmas between; and
    the same in the body of a time loop the model cannot take whole (deps.sweeps: the nests it runs one after
    another, each scheduled for one of its iterations)."""
    tree = parse(source.encode())
    split = {n.top.start_byte for n in nests(source, assume_noalias=True) if not n.known}
    out: list[tuple[str, list[ts.Node]]] = []
    for func in _descendants(tree.root_node, "function_definition"):
        body = func.child_by_field_name("body")
        decl = func.child_by_field_name("declarator")
        name = _func_name(decl)
        if body is None:
            continue
        bodies = [body] + [loop.child_by_field_name("body") for loop in _descendants(body, "for_statement")
                           if loop.start_byte in split and sweeps(loop)]
        for block in bodies:
            if block is not None:
                _runs(name, block, out)
    return out


def _runs(name: str, body: ts.Node, out: list[tuple[str, list[ts.Node]]]) -> None:
    run: list[ts.Node] = []
    for child in body.named_children:
        if child.type == "for_statement":
            run.append(child)
        elif child.type == "comment" or (child.type == "preproc_call" and b"pragma" in (child.text or b"")):
            continue
        else:
            if run:
                out.append((name, run))
            run = []
    if run:
        out.append((name, run))


def _func_name(decl: ts.Node | None) -> str:
    while decl is not None and decl.type != "identifier":
        decl = decl.child_by_field_name("declarator")
    return (decl.text or b"").decode() if decl is not None else "?"


def _descendants(node: ts.Node, kind: str) -> list[ts.Node]:
    out, stack = [], [node]
    while stack:
        n = stack.pop()
        if n.type == kind:
            out.append(n)
        stack.extend(reversed(n.children))
    return out


def _start(data: bytes, first: ts.Node) -> int:
    """The start of the first nest, with the pragma lines right before it (cloops.parse blanks pragmas: read the text)."""
    start = first.start_byte
    while True:
        line_start = data.rfind(b"\n", 0, start) + 1
        prev_start = data.rfind(b"\n", 0, max(line_start - 1, 0)) + 1 if line_start > 0 else 0
        if data[line_start:start].strip() or line_start == 0:
            return start
        prev = data[prev_start:line_start - 1]
        if not _PRAGMA.fullmatch(prev) or prev.rstrip().endswith(b"\\"):
            return start
        start = prev_start + (len(prev) - len(prev.lstrip()))


def models(source: str) -> list[Model]:
    """A model per run of nests (the whole run where it is inside the model, else each nest known on its own)."""
    data = source.encode()
    out: list[Model] = []
    runs = regions(source)
    for func, run in runs:
        whole = _model(data, func, run)
        if whole is not None or len(run) == 1:
            alone = sum(f == func for f, _ in runs) == 1
            out += [replace(m, whole_function=alone and m.count == len(run)) for m in whole or []]
            continue
        out += [m for n in run for m in _model(data, func, [n]) or []]
    return out


def _coarse(fine: Model) -> Model | None:
    """The model with each local's declaring block as one unit over the loops around the block: the scheduler then
    keeps every instance of the local whole (a product's `double s = 0; for k ...; c = s;` moves as one piece, and
    the loops around it may be tiled, fused, run in parallel), and codegen prints the block as written. None where a
    local is declared elsewhere than directly in a loop's body."""
    nest, ctx = fine.nest, isl.Context()
    blocks: dict[int, tuple[ts.Node, int]] = {}  # block id -> (block, its loop's depth + 1)
    for st in nest.stmts:
        if st.node.type != "declaration":
            continue
        block = st.node.parent
        loop = block.parent if block is not None else None
        if block is None or block.type != "compound_statement" or loop is None or loop.type != "for_statement":
            return None
        depth = next((li.depth + 1 for li in nest.loops if li.node.id == loop.id), None)
        if depth is None:
            return None
        blocks[block.id] = (block, depth)
    outer = {k: v for k, v in blocks.items() if not any(
        o.start_byte <= v[0].start_byte and v[0].end_byte <= o.end_byte and o.id != k for o, _ in blocks.values())}
    units: dict[str, Unit] = {}
    owner: dict[str, tuple[str, int]] = {}  # statement -> (unit, depth)
    for k, (block, depth) in enumerate(outer.values()):
        inside = [st for st in nest.stmts if block.start_byte <= st.node.start_byte and st.node.end_byte <= block.end_byte]
        name = f"B{k}"
        units[name] = Unit(name, block, [nest.loops[i].var for i in inside[0].loops[:depth]], inside, True)
        owner.update({st.name: (name, depth) for st in inside})
    for st in nest.stmts:
        if st.name not in owner:
            units[st.name] = Unit(st.name, st.node, [nest.loops[i].var for i in st.loops], [st])
    privates = {loc.obj for loc in fine.locals}

    def lift(text: str, keep_local: bool) -> isl.UnionMap:
        out = isl.UnionMap.read_from_str(ctx, "{ }")
        for m in _maps(isl.UnionMap.read_from_str(ctx, text)):
            stmt = m.get_tuple_name(isl.dim_type.in_)
            if stmt in owner:
                if not keep_local and m.get_tuple_name(isl.dim_type.out) in privates:
                    continue
                unit, depth = owner[stmt]
                m = m.project_out(isl.dim_type.in_, depth, m.dim(isl.dim_type.in_) - depth)
                m = m.set_tuple_name(isl.dim_type.in_, unit)
            out = out.union(isl.UnionMap.from_map(m))
        return out

    domains = isl.UnionSet.read_from_str(ctx, "{ }")
    for dom in _sets(isl.UnionSet.read_from_str(ctx, fine.domains)):
        stmt = dom.get_tuple_name()
        if stmt in owner:
            unit, depth = owner[stmt]
            dom = dom.project_out(isl.dim_type.set, depth, dom.dim(isl.dim_type.set) - depth).set_tuple_name(unit)
        domains = domains.union(isl.UnionSet.from_set(dom))
    # a block's place in the original order: its first statement's, cut at the block's loop (the block is that loop's
    # whole body), the rest zeros
    order = isl.UnionMap.read_from_str(ctx, "{ }")
    for m in _maps(isl.UnionMap.read_from_str(ctx, fine.order)):
        stmt = m.get_tuple_name(isl.dim_type.in_)
        if stmt in owner:
            unit, depth = owner[stmt]
            if units[unit].stmts[0].name != stmt:
                continue
            n_out = m.dim(isl.dim_type.out)
            m = m.project_out(isl.dim_type.out, 2 * depth, n_out - 2 * depth)
            m = m.project_out(isl.dim_type.in_, depth, m.dim(isl.dim_type.in_) - depth).set_tuple_name(isl.dim_type.in_, unit)
            m = m.add_dims(isl.dim_type.out, n_out - 2 * depth)
            for d in range(2 * depth, n_out):
                m = m.fix_val(isl.dim_type.out, d, isl.Val.int_from_si(ctx, 0))
            m = m.set_tuple_name(isl.dim_type.out, "T")
        order = order.union(isl.UnionMap.from_map(m))
    writes, reads = lift(fine.writes, False), lift(fine.reads, False)
    order = order.intersect_domain(domains)
    before = order.lex_lt_union_map(order)
    deps = (writes.apply_range(reads.reverse()).union(reads.apply_range(writes.reverse()))
            .union(writes.apply_range(writes.reverse())).intersect(before))
    if not order.is_injective():
        return None
    return Model(fine.func, nest, fine.count, fine.start, fine.end, fine.stmts, [], units, str(domains), str(deps.coalesce()),
                 str(order), str(writes), str(reads), True)


def _model(data: bytes, func: str, run: list[ts.Node]) -> list[Model] | None:
    start, end = _start(data, run[0]), run[-1].end_byte
    # the region's pragmas are the schedule's to decide: blanked (same length, so offsets hold) for the analysis
    region = _PRAGMA.sub(lambda m: b" " * len(m.group(0)), data[start:end])
    first = run[0].start_byte  # where the analysed nest starts: the wrapper loop at `start`, or the nest itself
    if len(run) > 1:
        first = start
        head = f"for (long {_WRAP} = 0; {_WRAP} < 1; {_WRAP}++) {{ ".encode()
        text = data[:start] + head + region + b" }" + data[end:]
    else:
        text = data[:start] + region + data[end:]
    found = [n for n in nests(text.decode(errors="replace"), assume_noalias=True) if n.top.start_byte == first]
    if len(found) != 1 or not found[0].known or getattr(found[0], "approximated", False):
        return None
    nest = found[0]
    if not nest.stmts or len(nest.stmts) > MAX_STMTS or max(len(s.loops) for s in nest.stmts) > MAX_DEPTH:
        return None
    # a parameter generated code cannot name (a remainder; isl also takes tens of seconds to schedule one): no model
    if any(nest.param_c(p) is None for p in nest.params):
        return None
    locals_ = _locals(nest, text.decode(errors="replace"))
    if locals_ is None or not _simple_statements(nest, len(run) > 1):
        return None
    if not _loop_vars_private(data, run, nest, start, end):
        return None
    loops = nest.loops
    units = {st.name: Unit(st.name, st.node, [loops[i].var for i in st.loops], [st]) for st in nest.stmts}
    fine = Model(func, nest, len(run), start, end, {st.name: st for st in nest.stmts}, locals_, units, str(nest.domains),
                 str(nest.deps), str(nest.schedule), str(nest.writes), str(nest.reads))
    coarse = _coarse(fine) if locals_ else None
    # with its locals' blocks whole where it can be: the fine model's freedom inside a block is what the lifetime
    # check refuses, at a cost (seconds a schedule on a product chain)
    return [coarse] if coarse is not None else [fine]


def _simple_statements(nest: Nest, wrapped: bool) -> bool:
    """Every statement an expression statement or a one-scalar declaration, none under an `else` (deps.py's domains
    over-approximate an else branch); a condition outside the model is a statement of deps.py's own (its condition
    node), refused as neither."""
    for s in nest.stmts:
        if s.node.type not in ("expression_statement", "declaration"):
            return False
        up, looped = s.node.parent, False
        while up is not None and up != nest.top.parent:
            if up.type == "else_clause":
                return False
            if up.type == "if_statement" and looped:  # deps.py's loops under an `if` do not carry its condition
                return False
            looped = looped or up.type == "for_statement"
            up = up.parent
    # declarations the model has no statement for (a local array, a declaration without initializer) stay out
    stmt_nodes = {s.node.id for s in nest.stmts}
    for d in _descendants(nest.top, "declaration"):
        if d.parent is not None and d.parent.type == "for_statement":
            continue  # a loop header's `long i = 0`
        if d.id not in stmt_nodes:
            return False
    return True


def _locals(nest: Nest, text: str) -> list[Local] | None:
    """The scalars declared by the nest's statements, or None where one cannot be hoisted: an array or pointer, more
    than one declarator, or a statement naming one that it does not access (another object of that name)."""
    out: dict[str, Local] = {}  # by the model's object
    for s in nest.stmts:
        if s.node.type != "declaration":
            continue
        ds = s.node.children_by_field_name("declarator")
        ty = s.node.child_by_field_name("type")
        if len(ds) != 1 or ds[0].type != "init_declarator" or ty is None:
            return None
        name_node = ds[0].child_by_field_name("declarator")
        if name_node is None or name_node.type != "identifier":
            return None
        name = (name_node.text or b"").decode()
        writes = [a for a in s.accesses if a.write and a.array.startswith(f"{name}@")]
        if len(writes) != 1:
            return None
        obj = "A_" + re.sub(r"\W", "_", writes[0].array)
        out[obj] = Local(name, (ty.text or b"").decode(), obj, name)
    names = [loc.name for loc in out.values()]
    for k, loc in enumerate(out.values()):
        if names.count(loc.name) > 1:  # two sibling blocks' `double s`: one variable each in the hoisted block
            loc.cname = f"{loc.name}_ko{k}"
            if re.search(rf"\b{loc.cname}\b", text):
                return None
    for s in nest.stmts:  # a statement that names a local accesses exactly one object of that name: that local
        mine = [a.array for a in s.accesses if "@" in a.array]
        for ident in _descendants(s.node, "identifier"):
            name = (ident.text or b"").decode()
            if name in names and len({m for m in mine if m.split("@")[0] == name}) != 1:
                return None
    return list(out.values())


def _loop_vars_private(data: bytes, run: list[ts.Node], nest: Nest, start: int, end: int) -> bool:
    """Loop variables declared outside their `for` keep no final value after the new code: none may be named
    outside the region but in declarations."""
    outside = [v.var for v in nest.loops if v.var != _WRAP and (v.node.child_by_field_name("initializer") is None or
               v.node.child_by_field_name("initializer").type != "declaration")]  # type: ignore[union-attr]
    if not outside:
        return True
    func = run[0].parent
    while func is not None and func.type != "function_definition":
        func = func.parent
    if func is None:
        return False
    for ident in _descendants(func, "identifier"):
        if ident.start_byte >= start and ident.end_byte <= end:
            continue
        if (ident.text or b"").decode() in outside:
            up = ident.parent
            while up is not None and up.type not in ("declaration", "parameter_declaration", "function_declarator",
                                                     "function_definition"):
                up = up.parent
            if up is None or up.type == "function_definition":
                return False
    return True


# --- scheduling -----------------------------------------------------------------------------------------------

def schedule(model: Model, options: Options) -> Scheduled | None:
    """isl's schedule of the model with these options, checked; None where isl fails, the options do not apply, or
    a check fails. Where the stride-1 reorder is what fails (it moved a loop into a local's lifetime), the schedule
    without it."""
    found = _schedule(model, options)
    if found is None and options.stride:
        return schedule(model, replace(options, stride=False))
    if found is None and options.tile and options.tile_members != 2:
        # tiling a loop inside a local's lifetime (the k of `s = 0; for k: s += ...; c = s`) fails the check: the
        # outer members only, down to two
        members = options.tile_members or MAX_DEPTH + 1
        return schedule(model, replace(options, tile_members=members - 1))
    return found


def _schedule(model: Model, options: Options) -> Scheduled | None:
    ctx = _ctx()
    try:
        domains = isl.UnionSet.read_from_str(ctx, model.domains)
        deps = isl.UnionMap.read_from_str(ctx, model.deps)
        ctx.set_tile_scale_tile_loops(1)
        ctx.set_tile_shift_point_loops(1)
        if options.fusion not in model.computed:  # the scheduler's answer depends on the fusion option only
            ctx.set_schedule_serialize_sccs(1 if options.fusion == "min" else 0)
            ctx.set_schedule_outer_coincidence(1 if options.fusion == "min" else 0)  # apart, and parallel outer loops
            ctx.set_schedule_whole_component(1 if options.fusion == "whole" else 0)
            sc = isl.ScheduleConstraints.on_domain(domains).set_validity(deps).set_proximity(deps).set_coincidence(deps)
            model.computed[options.fusion] = str(sc.compute_schedule())
        sched = isl.Schedule.read_from_str(ctx, model.computed[options.fusion])
        notes: list[str] = []
        shaped = _shape(model, sched, options, notes)
        if shaped is None:
            return None
        if not check(model, shaped):
            return None
        return Scheduled(model, options, shaped, notes)
    except isl.Error:
        return None


def check(model: Model, sched: isl.Schedule) -> bool:
    """Whether code from `sched` computes what the original does: every dependence goes forward, the hoisted locals'
    lifetimes do not interleave, and every parallel-marked loop carries none (see _parallel_ok)."""
    ctx = sched.get_ctx()
    deps = isl.UnionMap.read_from_str(ctx, model.deps)
    if not sched.get_domain().is_equal(isl.UnionSet.read_from_str(ctx, model.domains)):
        return False
    smap = sched.get_map()
    return legal(deps, smap) and _lifetimes_ok(model, ctx, smap) and _parallel_ok(model, ctx, sched, deps)


def legal(deps: isl.UnionMap, smap: isl.UnionMap) -> bool:
    """Every dependence goes forward in the schedule `smap` (source strictly before sink)."""
    if deps.is_empty():
        return True
    return bool(deps.is_subset(smap.lex_lt_union_map(smap)))


def _bands(node: isl.ScheduleNode) -> list[isl.ScheduleNode]:
    """The outermost band nodes (no band above them), in tree order."""
    out: list[isl.ScheduleNode] = []
    if node.get_type() == isl.schedule_node_type.band:
        return [node]
    for k in range(node.n_children()):
        out += _bands(node.child(k))
    return out


def _coincident_bands(node: isl.ScheduleNode) -> list[isl.ScheduleNode]:
    """The outermost bands with a coincident member, looking below those that have none."""
    if node.get_type() == isl.schedule_node_type.band and any(
            node.band_member_get_coincident(k) for k in range(node.band_n_member())):
        return [node]
    return [b for k in range(node.n_children()) for b in _coincident_bands(node.child(k))]


def _at(sched: isl.Schedule, path: list[int]) -> isl.ScheduleNode:
    node = sched.get_root()
    for k in path:
        node = node.child(k)
    return node


def _path(node: isl.ScheduleNode) -> list[int]:
    out = []
    while node.has_parent():
        out.append(node.get_child_position())
        node = node.parent()
    return out[::-1]


def _shape(model: Model, sched: isl.Schedule, options: Options, notes: list[str]) -> isl.Schedule | None:
    """Apply the options to the tree: stride order, tiling or unroll-and-jam, wavefront, parallel marks."""
    paths = [_path(b) for b in _bands(sched.get_root())]
    if not paths:
        return None
    if model.count > 1:
        split = f", distributed into {len(paths)} loop nests" if len(paths) > model.count else ""
        notes.append(f"{'fuse' if len(paths) == 1 else 'keep apart'} {model.label}{split}")
    else:
        apart = f" into {len(paths)} loop nests" if len(paths) > 1 else ""
        notes.append(f"{'distribute' if apart else 'reschedule'} {model.label}{apart}")
    if options.stride:
        for path in reversed(paths):
            sched = _unit_stride(model, sched, path, notes)
    tiled: dict[tuple[int, ...], list[str]] = {}  # each tiled band's path and its members' labels before tiling
    if options.tile or options.unroll:
        for path in reversed(paths):  # inner changes keep the paths of the bands before them
            done = _tile(model, sched, path, options, notes)
            if done is not None:
                sched, tiled[tuple(path)] = done
        if not tiled:
            return None
    elif options.wavefront:
        return None
    else:
        for path in paths:
            sched = _separate(sched, path)
    if options.parallel:
        sched = _mark_parallel(sched, notes, tiled)
    return sched


def _tile(model: Model, sched: isl.Schedule, path: list[int], options: Options,
          notes: list[str]) -> tuple[isl.Schedule, list[str]] | None:
    """Tile (or strip-mine for unroll-and-jam) the permutable band at `path`; None where the band does not allow it."""
    band = _at(sched, path)
    n = band.band_n_member()
    labels = _labels(band)
    if not band.band_get_permutable() and n > 1:
        return None
    if options.tile:
        if options.tile_members and options.tile_members >= n:
            return None  # (a retry with fewer members than this band has: another band's)
        if options.tile_members:
            band = band.band_split(options.tile_members)
            n = options.tile_members
        if n < 2:
            return None
        sizes = isl.MultiVal.zero(band.band_get_space())
        for k in range(n):
            sizes = sizes.set_val(k, isl.Val.int_from_si(sched.get_ctx(), options.tile))
        band = band.band_tile(sizes)
        _note(notes, f"tile {'x'.join([str(options.tile)] * n)} over {', '.join(labels[:n])}")
        labels = labels[:n]
        if options.stride and not options.wavefront:
            band = _sink_stride(model, band, labels, notes)
        if options.wavefront:  # only for a band with no parallel loop of its own (an in-place sweep's)
            if any(band.band_member_get_coincident(k) for k in range(n)):
                return None
            skewed = _wavefront(band)
            if skewed is None:
                return None
            band, at = skewed
            labels[at] = f"{_par(labels[at])} + {_par(labels[at + 1])}"
            _note(notes, f"the tiles of one anti-diagonal (along {labels[at]}) as a wavefront")
        return band.get_schedule(), labels
    sizes = isl.MultiVal.zero(band.band_get_space())
    for k in range(n):
        sizes = sizes.set_val(k, isl.Val.int_from_si(sched.get_ctx(), options.unroll if k == 0 else 1))
    band = band.band_tile(sizes)
    for k in range(n):
        band = band.band_member_set_ast_loop_type(k, isl.ast_loop_type.separate)
    point = band.child(0).band_member_set_ast_loop_type(0, isl.ast_loop_type.unroll)
    _note(notes, f"unroll-and-jam {labels[0]} by {options.unroll}")
    return point.parent().get_schedule(), [f"{labels[0]} (strip-mined)", *labels[1:]]


def _separate(sched: isl.Schedule, path: list[int]) -> isl.Schedule:
    """Each loop of the bands at and under `path` split where the statements it runs change (isl's `separate` loop
    type): a statement fused in at one value of an outer loop (the `c *= beta` of `for p: for j: c += ...` at
    p == 0) gets that iteration as a loop of its own instead of a guard in the innermost loop."""
    def separate(node: isl.ScheduleNode) -> isl.ScheduleNode:
        if node.get_type() == isl.schedule_node_type.band:
            for k in range(node.band_n_member()):
                node = node.band_member_set_ast_loop_type(k, isl.ast_loop_type.separate)
        return node

    return _at(sched, path).map_descendant_bottom_up(separate).get_schedule()


def _sink_stride(model: Model, tile: isl.ScheduleNode, labels: list[str], notes: list[str]) -> isl.ScheduleNode:
    """Where loops run inside the tiled band (a time loop and a rod loop over `for i` sweeps: tridiag_soa's `for t:
    for s: { ...; for i ...; for i ... }`), the point loop of the member with the most stride-1 accesses moves below
    them, innermost in every statement (isl's band sink): the tile loops keep a block of the arrays in cache across
    the outer loop's iterations, and the innermost loops walk memory with stride 1. `tile` is the tile band; returns
    it (its subtree changed or not); check() decides whether the result is legal."""
    point = tile.child(0)
    if point.get_type() != isl.schedule_node_type.band or not _band_below(point.child(0)):
        return tile
    n = point.band_n_member()
    best, _ = _stride_member(model, point, [v if v.isidentifier() else None for v in labels[:n]])
    if best is None:
        return tile
    at = _path(tile)
    point = _sink_last(_last(point, best))
    _note(notes, f"the {labels[best]} loop of each tile innermost, below the loops inside")
    return _at(point.get_schedule(), at)


def _last(band: isl.ScheduleNode, k: int) -> isl.ScheduleNode:
    """The band with member `k` moved last (the others in their order); permutable and coincident flags not kept."""
    n = band.band_n_member()
    mupa = band.band_get_partial_schedule()
    new = mupa
    for idx, m in enumerate([m for m in range(n) if m != k] + [k]):
        new = new.set_at(idx, mupa.get_at(m))
    return band.delete().insert_partial_schedule(new)


def _sink_last(band: isl.ScheduleNode) -> isl.ScheduleNode:
    """The band's last member split off and sunk to the leaves of its subtree (below every loop inside)."""
    n = band.band_n_member()
    if n > 1:
        band = band.band_split(n - 1).child(0)
    return band.band_sink()


def _band_below(node: isl.ScheduleNode) -> bool:
    """Whether a band node is at or below `node`."""
    if node.get_type() == isl.schedule_node_type.band:
        return True
    return any(_band_below(node.child(k)) for k in range(node.n_children()))


def _note(notes: list[str], note: str) -> None:
    if note not in notes:
        notes.append(note)


def _par(label: str) -> str:
    return f"({label})" if " " in label else label


def _labels(band: isl.ScheduleNode) -> list[str]:
    """Each member of the band as the loop expression it follows (`i`, `t + j`), or by its number."""
    mupa = band.band_get_partial_schedule()
    return [_expr(mupa.get_at(k)) or f"dimension {k}" for k in range(band.band_n_member())]


def _expr(upa: isl.UnionPwAff) -> str | None:
    """The linear part of a member over the original loop variables, where every statement it moves agrees on it."""
    found = set()
    for pa in _pw_affs(upa):
        pieces = [aff for _, aff in pa.get_pieces()]
        if len(pieces) != 1:
            return None
        aff, terms = pieces[0], []
        for k in range(aff.dim(isl.dim_type.in_)):
            c = aff.get_coefficient_val(isl.dim_type.in_, k).to_python()
            name = (aff.get_dim_name(isl.dim_type.in_, k) or "").removeprefix("v_")
            if c and name != _WRAP:
                terms.append(name if c == 1 else f"-{name}" if c == -1 else f"{c}{name}")
        if terms:
            found.add(" + ".join(terms).replace("+ -", "- "))
    return found.pop() if len(found) == 1 else None


def _follows(upa: isl.UnionPwAff) -> str | None:
    """The original loop variable a member is (plus constants), if any."""
    e = _expr(upa)
    return e if e is not None and e.isidentifier() else None


def _pw_affs(upa: isl.UnionPwAff) -> list[isl.PwAff]:
    lst = upa.get_pw_aff_list()
    return [lst.get_at(k) for k in range(lst.n_pw_aff())]


def _unit_stride(model: Model, sched: isl.Schedule, path: list[int], notes: list[str]) -> isl.Schedule:
    """In the innermost band under `path` (a permutable one), move innermost the member that follows the loop with
    the most stride-1 accesses (the last subscript varies with it) and the fewest large-stride ones."""
    node = _at(sched, path)
    inner = node
    while True:  # the deepest band on the first-child path
        nxt, cur = None, inner
        while cur.has_children():
            cur = cur.child(0)
            if cur.get_type() == isl.schedule_node_type.band:
                nxt = cur
                break
        if nxt is None:
            break
        inner = nxt
    n = inner.band_n_member()
    if not inner.band_get_permutable() and n > 1:
        return sched
    mupa = inner.band_get_partial_schedule()
    follows = [_follows(mupa.get_at(k)) for k in range(n)]
    best, scores = _stride_member(model, inner, follows)
    if best is None:
        return sched
    if scores[best] == scores[n - 1]:
        best = n - 1  # a tie keeps isl's order
    below = _band_below(inner.child(0))
    if best == n - 1 and not below:
        return sched
    coincident = [inner.band_member_get_coincident(k) for k in range(n) if k != best] + \
        [inner.band_member_get_coincident(best)]
    node = _last(inner, best).band_set_permutable(1)
    for k, c in enumerate(coincident):
        node = node.band_member_set_coincident(k, int(c))
    if below:  # loops inside the band: innermost means below them, in every statement (see _sink_stride)
        node = _sink_last(node)
        _note(notes, f"{follows[best]} innermost for stride-1 accesses, below the loops inside")
        return node.get_schedule()
    _note(notes, f"{follows[best]} innermost for stride-1 accesses")
    return node.get_schedule()


def _stride_member(model: Model, band: isl.ScheduleNode, loops: list[str | None]) -> tuple[int | None, list[int | None]]:
    """The band member (the loop variable each follows, None for none) with the most stride-1 accesses over the band's
    statements, the last on a tie, None where no member has a positive score; and every member's score."""
    names = {st.get_tuple_name() for st in _sets(band.get_domain())}
    scores = [_stride_score(model, v, names) if v else None for v in loops]
    best = max((k for k in range(len(loops)) if scores[k] is not None), key=lambda k: (scores[k], k), default=None)
    return (best if best is not None and (scores[best] or 0) > 0 else None), scores


def _stride_score(model: Model, var: str, names: set[str]) -> int:
    """Accesses whose last subscript moves with `var` by 1 (stride 1) minus those where it moves by more (`var` in an
    earlier subscript, or times a parameter in a flat one), over the statements `names` (the band's: another nest's
    loop of the same name is another loop)."""
    score = 0
    for name, s in model.stmts.items():
        if name not in names or not any(model.nest.loops[i].var == var for i in s.loops):
            continue
        for a in s.accesses:
            if not a.dims:
                continue
            last = a.dims[-1]
            if abs(last.get((var,), 0)) == 1:
                score += 1
            if any(var in m for d in a.dims[:-1] for m in d) or any(var in m and len(m) > 1 for m in last):
                score -= 1
    return score


def _wavefront(band: isl.ScheduleNode) -> tuple[isl.ScheduleNode, int] | None:
    """The tile band (.., t_p, t_p+1, ...) as (.., t_p + t_p+1, t_p+1, ...) for the first two members that take more
    than one value (a short time loop's tile loop runs once): legal for a permutable band, and t_p+1 then carries
    nothing within one t_p + t_p+1 (checked later)."""
    n = band.band_n_member()
    mupa = band.band_get_partial_schedule()
    dom = band.get_domain()
    several = [_several(isl.UnionMap.from_union_pw_aff(mupa.get_at(k)).intersect_domain(dom).range()) for k in range(n)]
    at = next((k for k in range(n - 1) if several[k] and several[k + 1]), None)
    if at is None:
        return None
    node = band.delete().insert_partial_schedule(mupa.set_at(at, mupa.get_at(at).add(mupa.get_at(at + 1))))
    node = node.band_set_permutable(1)
    return node.band_member_set_coincident(at + 1, 1), at


def _several(values: isl.UnionSet) -> bool:
    """Whether a loop takes two values or more for some parameters."""
    s = isl.Set.from_union_set(values)
    return not s.lex_lt_set(s).is_empty()


def _mark_parallel(sched: isl.Schedule, notes: list[str], tiled: dict[tuple[int, ...], list[str]]) -> isl.Schedule:
    """Above each outermost band with a coincident member (or, where it has none, the bands below it: a time loop's),
    split at its first coincident member and mark that member parallel."""
    for path in [_path(b) for b in _coincident_bands(sched.get_root())]:
        band = _at(sched, path)
        n = band.band_n_member()
        k = next(m for m in range(n) if band.band_member_get_coincident(m))
        name = f"the outer loop over {tiled[tuple(path)][k]}" if tuple(path) in tiled else _labels(band)[k]
        if k > 0:
            band = band.band_split(k).child(0)
        band = band.insert_mark(isl.Id(f"{PARALLEL}_{band.get_schedule_depth()}", context=sched.get_ctx()))
        sched = band.get_schedule()
        if f"parallel for on {name}" not in notes:
            notes.append(f"parallel for on {name}")
    if len([n for n in notes if n.startswith("parallel for")]) > 1:  # one sentence for the loops of several nests
        first = notes.index(next(n for n in notes if n.startswith("parallel for")))
        loops = [n.removeprefix("parallel for on ") for n in notes if n.startswith("parallel for")]
        notes[first:] = [n for n in notes[first:] if not n.startswith("parallel for")]
        notes.insert(first, f"parallel for on {' and on '.join(loops)}")
    return sched


def _parallel_ok(model: Model, ctx: isl.Context, sched: isl.Schedule, deps: isl.UnionMap) -> bool:
    """Each parallel mark's band member carries no dependence: pairs equal in every outer schedule dimension are equal
    in it too; and each hoisted local's accesses of one instance stay inside one iteration of it (its private copy)."""
    same = _same_instance(model, ctx)
    ok = True

    def visit(node: isl.ScheduleNode) -> bool:
        nonlocal ok
        if node.get_type() == isl.schedule_node_type.mark and node.mark_get_id().get_name().startswith(PARALLEL):
            band = node.child(0)
            prefix = band.get_prefix_schedule_union_map()
            dom = band.get_domain()
            member = band.band_get_partial_schedule_union_map()
            if band.band_n_member() != 1:
                member = isl.UnionMap.from_union_pw_aff(band.band_get_partial_schedule().get_at(0))
            member = member.intersect_domain(dom)
            both = prefix.flat_range_product(member)
            eq_prefix = prefix.apply_range(prefix.reverse())
            eq_both = both.apply_range(both.reverse())
            d = deps.intersect_domain(dom).intersect_range(dom)
            if not d.intersect(eq_prefix).is_subset(eq_both):
                ok = False
            s = same.intersect_domain(dom).intersect_range(dom)
            if not s.is_empty() and not s.is_subset(eq_both):
                ok = False
        return True

    sched.get_root().foreach_descendant_top_down(visit)
    return ok


def _local_relations(model: Model, ctx: isl.Context) -> tuple[isl.UnionMap, isl.UnionMap]:
    """The hoisted locals' write and read relations, each local's object indexed as in the model."""
    objs = {loc.obj for loc in model.locals}
    writes, reads = isl.UnionMap.read_from_str(ctx, "{ }"), isl.UnionMap.read_from_str(ctx, "{ }")
    for rel, kind in ((model.writes, "w"), (model.reads, "r")):
        for m in _maps(isl.UnionMap.read_from_str(ctx, rel)):
            if m.get_tuple_name(isl.dim_type.out) in objs:
                if kind == "w":
                    writes = writes.union(isl.UnionMap.from_map(m))
                else:
                    reads = reads.union(isl.UnionMap.from_map(m))
    return writes, reads


def _maps(umap: isl.UnionMap) -> list[isl.Map]:
    out: list[isl.Map] = []
    umap.foreach_map(out.append)
    return out


def _sets(uset: isl.UnionSet) -> list[isl.Set]:
    out: list[isl.Set] = []
    uset.foreach_set(out.append)
    return out


def _contract(rel: isl.UnionMap, ctx: isl.Context) -> isl.UnionMap:
    """Accesses to each local as one object: its indices dropped."""
    out = isl.UnionMap.read_from_str(ctx, "{ }")
    for m in _maps(rel):
        name = m.get_tuple_name(isl.dim_type.out)
        m = m.project_out(isl.dim_type.out, 0, m.dim(isl.dim_type.out)).set_tuple_name(isl.dim_type.out, name)
        out = out.union(isl.UnionMap.from_map(m))
    return out


def _lifetimes_ok(model: Model, ctx: isl.Context, smap: isl.UnionMap) -> bool:
    """One variable per hoisted local holds each instance's value only if no access to another instance of it comes
    between two accesses to one instance (their order among themselves is the dependences' business)."""
    if not model.locals:
        return True
    writes, reads = _local_relations(model, ctx)
    acc = writes.union(reads)
    whole = _contract(acc, ctx)
    same = acc.apply_range(acc.reverse())
    other = whole.apply_range(whole.reverse()).subtract(same)
    later = other.intersect(smap.lex_lt_union_map(smap))
    return bool(later.apply_range(later).intersect(same).is_empty())


def _same_instance(model: Model, ctx: isl.Context) -> isl.UnionMap:
    """Pairs of statement instances that access one instance of a hoisted local."""
    if not model.locals:
        return isl.UnionMap.read_from_str(ctx, "{ }")
    writes, reads = _local_relations(model, ctx)
    acc = writes.union(reads)
    return acc.apply_range(acc.reverse())


def options_space(model: Model, parallel: bool = True) -> list[Options]:
    """The option sets tried for a model: fusion strategies x (plain, tiled 32/64/128, a tiled wavefront where
    parallel loops are wanted, unroll-and-jam by 2 and 4)."""
    out = []
    reuse = _reuse(model)
    for fusion in ("max", "min", "whole") if len(model.stmts) > 1 else ("max",):
        out.append(Options(fusion=fusion, parallel=parallel))
        if not reuse:
            continue
        for size in (32, 64, 128):
            out.append(Options(fusion=fusion, tile=size, parallel=parallel))
        if parallel:
            out.append(Options(fusion=fusion, tile=64, wavefront=True))
        for factor in (2, 4):
            out.append(Options(fusion=fusion, unroll=factor, parallel=parallel))
    return out


def _reuse(model: Model) -> bool:
    """Whether tiling or unroll-and-jam has reuse to exploit: some access spans two loops' worth of elements (its
    subscripts move with two loop variables or more) and stays put along another loop around it (b[k][j] across i
    in a product, u[i][j] across a time loop), or any access stays put along a time loop (a loop no subscript
    names). A nest whose only reuse is a vector's (x[i] across j) gets neither."""
    for s in model.stmts.values():
        loop_vars = {model.nest.loops[i].var for i in s.loops} - {_WRAP}
        subscripted = {v for a in s.accesses for d in a.dims or () for m in d for v in m if v in loop_vars}
        for a in s.accesses:
            if not a.dims:
                continue
            moved = {v for d in a.dims for m in d for v in m if v in loop_vars}
            if moved and loop_vars - moved and (len(moved) >= 2 or loop_vars - subscripted):  # or across a time loop
                return True
    return False


def same_order(s: Scheduled) -> bool:
    """Whether the schedule runs the statement instances in the original order (its code changes nothing but text)."""
    ctx = s.schedule.get_ctx()
    original = isl.UnionMap.read_from_str(ctx, s.model.order)
    new = s.schedule.get_map()
    return bool(original.lex_lt_union_map(original).is_equal(new.lex_lt_union_map(new)))
