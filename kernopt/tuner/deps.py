"""Dependence analysis of C loop nests in the polyhedral model, with isl (islpy).

`nests(source)` finds every outermost `for` nest inside a function body and, where the nest is inside the model,
models it as polyhedral compilers do. kernopt.tuner.model reads the C (loops, statements, their constraints and
accesses: what is inside the model and what is outside is said there); this module turns that into isl sets and
relations and answers the questions the loop moves ask:

- domains: each statement's iteration domain, from the loop bounds and the affine `if` conditions around it, with
  the definitions of the quotient and remainder parameters (`(9 * n + 7) / 8`, C's truncation toward zero) and of
  the locals set once from parameters (`long nj = ...;` is the parameter nj, its initializer a constraint);
- access relations: `A[i][j]` on arrays of arrays, `a[i * n + j]` / `t[(i * nk + k) * nj + j]` on flat arrays
  delinearized to `a[i][j]` only where isl proves each subscript within its stride on the statement's domain,
  `a[k]` for any affine k, scalars (one declared inside a loop body is a fresh object per iteration of the loops
  around its declaration, so it is indexed by them);
- the original execution order as a 2d+1 schedule (a loop that counts down orders its iterations by the negated
  variable).

Dependences are memory-based (every pair of instances touching one element, at least one writing, in execution
order): flow, anti and output. From them: which loops carry none (`parallel`, optionally ignoring the objects a
clause takes care of), which objects every iteration writes before it reads (`written_first`) and which local arrays
a private copy per thread may replace (`privatizable`), which permutations of a perfect band keep every dependence
distance lexicographically non-negative (`legal_permutation`), whether a band is fully permutable (tilable), which
skew would make it so, and which wavefront hyperplane carries every dependence so that the loops under it run in
parallel.

With `approximate` the model over-approximates where that stays sound instead of answering "don't know": a
subscript outside the model (`x[col[k]]`, `h[bin[i]]`) touches any element of its array (a write through one
conflicts with every access of the array; such reads and writes never make an object written first), and a
data-dependent bound that reads nothing the nest writes (`k < rowptr[i + 1]`) is no bound (the statements under it
may run). Such a nest answers `parallel` and `privatizable` and has no bands: no loop move rewrites its loops.

Outside the model every query answers None ("don't know"), with the reason (Nest.reason).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from fractions import Fraction

import islpy as isl
import tree_sitter as ts

from kernopt.tuner.cloops import _ancestors, _walk, parse
from kernopt.tuner.model import (  # noqa: F401  (PURE, declared_names, _declarator, _pure_functions: for callers)
    FEW,
    PURE,
    Access,
    Decl,
    LoopInfo,
    Poly,
    Stmt,
    Unknown,
    _add,
    _Builder,
    _chain,
    _changed,
    _declarator,
    _field,
    _ident,
    _isl_poly,
    _mul,
    _param,
    _pure_functions,
    _split,
    _text,
    declared_names,
)


@dataclass
class Band:
    """A perfect band: loops[k + 1] is the only statement in the body of loops[k]."""

    loops: tuple[int, ...]
    deltas: isl.Set | None  # dependence distances on the band's loops (direction-adjusted), not carried outside

    def __len__(self) -> int:
        return len(self.loops)


class Nest:
    """One outermost `for` nest of a function. `known` is False (with `reason`) when it is outside the
    model; every query then answers None."""

    def __init__(self, source: str, data: bytes, root: ts.Node, func: ts.Node, top: ts.Node, assume_noalias: bool,
                 approximate: bool = False) -> None:
        self.source = source
        self.top = top
        self.func = func
        self.approximated = False  # the model over-approximates a bound or an access (approximate): no loop moves
        self.line = top.start_point[0]
        self.reason = ""
        self.loops: list[LoopInfo] = []
        self.stmts: list[Stmt] = []
        self.assume_noalias = assume_noalias
        self.param_texts: dict[str, str] = {}  # a quotient parameter (`/0`) -> its C text, `((9 * n + 7) / 8)`
        self.noalias_assumed: set[tuple[str, str]] = set()
        try:
            b = _Builder(data, root, func, top, approximate)
            self.loops, self.stmts = b.loops, b.stmts
            self.param_texts = b.param_texts
            self._builder = b
            self._model(b)
        except Unknown as e:
            self.reason = str(e)
        except isl.Error as e:  # an expression isl rejects: outside the model too
            self.reason = f"isl: {e}"
        except RecursionError:  # an expression nested deeper than the walk follows (a 1000-term sum)
            self.reason = "an expression nested too deep to analyse"

    @property
    def known(self) -> bool:
        return not self.reason

    def param_c(self, p: str) -> str | None:
        """A parameter as a C expression: its name, a product `(m * n)`, a quotient's own text `((9 * n + 7) / 8)`;
        None for a remainder, which has no C text (generated code cannot name it)."""
        if "%" in p or "/" in p:
            return self.param_texts.get(p)
        return p if "*" not in p else "(" + " * ".join(p.split("*")) + ")"

    # --- the model ---------------------------------------------------------------------------------
    def _model(self, b: _Builder) -> None:
        if not self.stmts:
            raise Unknown("no statements")
        written = {a.array for s in self.stmts for a in s.accesses if a.write}
        accessed = {a.array for s in self.stmts for a in s.accesses}
        for x in sorted(written):
            for y in sorted(accessed - {x}):
                if self._may_alias(b, x, y):
                    raise Unknown(f"`{x}` and `{y}` may overlap (declare the pointers restrict)")
        params = sorted(b.params)
        self.params = params
        prefix = f"[{', '.join(_param(p) for p in params)}] -> " if params else ""
        depth = max(len(s.loops) for s in self.stmts)
        self.depth = depth
        domains: list[isl.Set] = []
        self._rels: list[tuple[str, bool, str]] = []  # (the object's name, written, access relation)
        self._exact: list[bool] = []  # for each of _rels: the statement runs and touches that element every time
        self.approximated = bool(b.inexact) or any(a.whole or a.free for s in self.stmts for a in s.accesses)
        self.domain: dict[str, isl.Set] = {}
        exact: dict[tuple[str, int], list[str]] = {}  # the subscripts of each exact access of a written array
        for s in self.stmts:
            cons = [c for i in s.loops for c in b.bounds[i]] + s.constraints + b.definitions
            vs = [_ident(self.loops[i].var) for i in s.loops]
            self.domain[s.name] = isl.Set(f"{prefix}{{ {s.name}[{', '.join(vs)}] : {' and '.join(cons) or 'true'} }}")
            for k, a in enumerate(s.accesses):
                if a.array in written and not a.whole:
                    exact[(s.name, k)] = self._dims(a, self.domain[s.name], s, {self.loops[i].var for i in s.loops}, b)
        arity = {s.accesses[k].array: len(dims) for (name, k), dims in exact.items() for s in self.stmts if s.name == name}
        writes: list[str] = []
        reads: list[str] = []
        sched: list[str] = []
        self._element_of: dict[tuple[str, int], list[str]] = {}  # (statement, access index) -> subscripts in isl
        for s in self.stmts:
            vs = [_ident(self.loops[i].var) for i in s.loops]
            dom = self.domain[s.name]
            domains.append(dom)
            t: list[str] = []
            for k, i in enumerate(s.loops):
                t += [str(s.position[k]), vs[k] if self.loops[i].step > 0 else f"-{vs[k]}"]
            t.append(str(s.position[len(s.loops)]))
            t += ["0"] * (2 * depth + 1 - len(t))
            sched.append(f"{prefix}{{ {s.name}[{', '.join(vs)}] -> T[{', '.join(t)}] }}")
            for k, a in enumerate(s.accesses):
                if a.array not in written:
                    continue
                cond = ""
                if a.whole:  # any element of the array: free subscripts, as many as its other accesses have
                    dims = [f"o{m}" for m in range(arity.get(a.array, 1))]
                elif a.defs or a.free:  # `x[i / 2]`: the quotient's value, defined for each instance; a free one any
                    outs = [f"o{m}" for m in range(len(exact[(s.name, k)]))]
                    equal = [f"{o} = {d}" for m, (o, d) in enumerate(zip(outs, exact[(s.name, k)], strict=True))
                             if m not in a.free]
                    inner = " and ".join([d for _, d in a.defs] + equal) or "true"
                    cond = f" : exists ({', '.join(r for r, _ in a.defs)} : {inner})" if a.defs else f" : {inner}"
                    dims = outs
                else:
                    dims = exact[(s.name, k)]
                    self._element_of[(s.name, k)] = dims
                rel = f"{prefix}{{ {s.name}[{', '.join(vs)}] -> A_{_safe(a.array)}[{', '.join(dims)}]{cond} }}"
                (writes if a.write else reads).append(rel)
                self._rels.append((a.array.split("@")[0], a.write, rel))
                self._exact.append(s.must and not a.whole and not a.may and not a.free)
        self.domains = _union_set(domains)
        self.schedule = _union_map(sched).intersect_domain(self.domains)
        self.writes = _union_map(writes).intersect_domain(self.domains)
        self.reads = _union_map(reads).intersect_domain(self.domains)
        self.flow, self.anti, self.output = self._dependences(self.writes, self.reads)
        self.deps = self.flow.union(self.anti).union(self.output).coalesce()

    def _dependences(self, writes: isl.UnionMap, reads: isl.UnionMap) -> tuple[isl.UnionMap, isl.UnionMap, isl.UnionMap]:
        """Flow, anti and output dependences of these accesses in the original execution order."""
        before = self.schedule.lex_lt_union_map(self.schedule)
        return (writes.apply_range(reads.reverse()).intersect(before), reads.apply_range(writes.reverse()).intersect(before),
                writes.apply_range(writes.reverse()).intersect(before))

    def _may_alias(self, b: _Builder, x: str, y: str) -> bool:
        if "@" in x or "@" in y:
            return False  # scalars declared in the nest
        x, y = b.origins.get(x, x), b.origins.get(y, y)  # a view of a parameter is that parameter here
        if x == y:
            return True
        rx, ry = b.rotations.get(x), b.rotations.get(y)
        if rx is not None or ry is not None:
            # pointers taking turns: two of one rotation hold two of its parameters, never one twice
            if rx is not None and rx == ry:
                return any(self._may_alias(b, p, q) for p, q in itertools.combinations(sorted(rx.params), 2))
            return any(self._may_alias(b, p, q) for p in (rx.params if rx else (x,)) for q in (ry.params if ry else (y,)))
        dx, dy = b.decls.get(x), b.decls.get(y)
        for name, d in ((x, dx), (y, dy)):
            # a pointer parameter or member the function assigns (`u = w;`, `s->a = s->b;`), or a name it declares
            # twice (a parameter `a` and a later block's `double a[4]`): its declaration says nothing here
            if d is not None and d.derivs and (d.where in ("param", "field") and name in b.changed
                                               or b.declared.get(name, 0) > 1):
                return True
        if x in b.fresh or y in b.fresh:
            return False  # a block an allocator returned, held for good: no other object overlaps it
        if dx is None or dy is None:  # an undeclared array: a macro or a header's global
            other = dx or dy
            return other is None or (bool(other.derivs) and not (other.distinct or other.restrict))
        if not dx.derivs or not dy.derivs:
            return False  # a scalar variable is its own object
        if dx.where == "local" and dx.derivs[0] == "*" or dy.where == "local" and dy.derivs[0] == "*":
            return True  # local pointers point anywhere
        # a restrict member keeps apart only from other objects: the same member through two struct pointers may
        # be one object (s == t), and restrict says nothing then
        same_member = dx.where == dy.where == "field" and x.split("->")[-1].split(".")[-1] == y.split("->")[-1].split(".")[-1]
        if dx.distinct or dy.distinct or ((dx.restrict or dy.restrict) and not same_member):
            return False
        if self.assume_noalias:
            self.noalias_assumed.add((x, y))
            return False
        return True

    def _dims(self, a: Access, dom: isl.Set, s: Stmt, loop_vars: set[str], b: _Builder) -> list[str]:
        """The subscripts of a written array's access as isl expressions (delinearized where proven)."""
        if a.dims is None:
            raise Unknown(f"`{a.text}`: a subscript outside the model on an array the nest writes")
        decl = b.decls.get(a.array)
        if len(a.dims) != 1 or decl is None or "@" in a.array:
            return [_isl_poly(d, loop_vars) for d in a.dims]
        packed = self._packed(a, dom, s, loop_vars)
        if packed is not None:
            return packed
        layout = self._layout(a.array, b)
        if layout is None:
            raise Unknown(f"`{a.text}`: the flat subscripts of `{a.array}` are not affine and do not delinearize")
        chain = layout
        if len(chain) == 1:
            return [_isl_poly(a.dims[0], loop_vars)]
        if a.defs:
            raise Unknown(f"`{a.text}`: a quotient or remainder of a loop variable in a flat subscript that delinearizes")
        mine = _split(a.dims[0], loop_vars)
        assert mine is not None
        subs = [mine.get(m, {}) for m in reversed(chain)]
        # the subscript at stride chain[k] must lie in [0, chain[k + 1] / chain[k]); one that lies a whole stride
        # below or above it borrows from the next (`r * n + n - 1` is row r, column n - 1: the same element)
        for k in range(len(chain) - 1):
            stride = list(chain[k + 1])
            for m in chain[k]:
                stride.remove(m)
            here, up = len(chain) - 1 - k, len(chain) - 2 - k
            for borrow in (0, 1, -1):
                sub = _add(subs[here], {(stride[0],): borrow})
                if self._within(dom, s, _isl_poly(sub, loop_vars), stride[0]):
                    subs[here], subs[up] = sub, _add(subs[up], {(): -borrow})
                    break
            else:
                raise Unknown(f"`{a.text}`: cannot prove `{_isl_expr_c(subs[here])}` lies in "
                              f"[0, {stride[0]}), so the flat index may not delinearize")
        return [_isl_poly(d, loop_vars) for d in subs]

    def _packed(self, a: Access, dom: isl.Set, s: Stmt, loop_vars: set[str]) -> list[str] | None:
        """A packed triangle's rows (`g[i * (i - 1) / 2 + j]`, or `row[j]` through `double *row = g + i * (i - 1) /
        2;`): a flat subscript Q(i) + e, Q the terms with the loop variable i (squared in one of them), e affine. Where
        every access of the array in the nest has the same Q and its e lies in [0, Q(i + 1) - Q(i)) on its domain
        (that width affine), row i is the elements [Q(i), Q(i + 1)), rows of different i never overlap (the width is
        >= 1 at every i accessed, and affine in i, so Q increases between them), and (i, e) names the element: the
        access is [i, e]. None where that is not proven (the caller then tries the flat layouts)."""
        p = a.dims[0] if a.dims is not None and len(a.dims) == 1 else {}
        rows = {v for m in p for v in m if v in loop_vars and m.count(v) > 1}
        if len(rows) != 1:
            return None
        (i,) = rows
        q = {m: c for m, c in p.items() if i in m}
        if any(v in loop_vars and v != i for m in q for v in m):
            return None  # a row that starts by another loop variable too (`i * (i + j)`): rows of one i may overlap
        for st in self.stmts:
            for other in st.accesses:
                if other.array == a.array and (other.dims is None or len(other.dims) != 1
                                               or {m: c for m, c in other.dims[0].items() if i in m} != q):
                    return None
        e = {m: c for m, c in p.items() if i not in m}
        width = _add(_shift(q, i), q, -1)
        if any(sum(v in loop_vars for v in m) > 1 for m in (*e, *width)) or \
                any(Fraction(c).denominator != 1 for c in (*e.values(), *width.values())):
            return None
        e_text = _isl_poly({m: int(c) for m, c in e.items()}, loop_vars)
        w_text = _isl_poly({m: int(c) for m, c in width.items()}, loop_vars)
        bound = isl.Set(f"[{', '.join(_param(x) for x in self.params)}] -> "
                        f"{{ {s.name}[{', '.join(_ident(self.loops[k].var) for k in s.loops)}] : "
                        f"0 <= {e_text} < {w_text} }}")
        return [_ident(i), e_text] if dom.is_subset(bound) else None

    def _within(self, dom: isl.Set, s: Stmt, sub: str, stride: str) -> bool:
        """0 <= sub < stride on the whole of the statement's domain."""
        bound = isl.Set(f"[{', '.join(_param(p) for p in self.params)}] -> "
                        f"{{ {s.name}[{', '.join(_ident(self.loops[i].var) for i in s.loops)}] : 0 <= {sub} < {_param(stride)} }}")
        return bool(dom.is_subset(bound))

    def _layout(self, array: str, b: _Builder) -> list[tuple[str, ...]] | None:
        """The stride chain shared by every flat subscript of the array ([()] when all are affine)."""
        polys = [a.dims[0] for s in self.stmts for a in s.accesses if a.array == array and a.dims]
        all_vars = {lp.var for lp in self.loops}
        if all(len(m) <= 1 for p in polys for m in p):
            return [()]
        parts = [_split(p, all_vars) for p in polys]
        if any(p is None for p in parts):
            return None
        return _chain({m for p in parts if p is not None for m in p})

    # --- queries -------------------------------------------------------------------------------------
    def declaration(self, name: str) -> Decl | None:
        """What the analysis took `name` to be (a parameter, local, global, or struct member `p->f`)."""
        builder = getattr(self, "_builder", None)
        return builder.decls.get(name) if builder is not None else None

    def same_element(self, s: Stmt, a: int, b: int) -> bool | None:
        """Whether accesses a and b (indices into s.accesses, of one array the nest writes) touch the same element
        in some instance of s; None if unknown."""
        if not self.known or (s.name, a) not in self._element_of or (s.name, b) not in self._element_of:
            return None
        da, db = self._element_of[(s.name, a)], self._element_of[(s.name, b)]
        if len(da) != len(db):
            return None
        prefix = f"[{', '.join(_param(p) for p in self.params)}] -> " if self.params else ""
        vs = ", ".join(_ident(self.loops[i].var) for i in s.loops)
        equal = " and ".join(f"{x} = {y}" for x, y in zip(da, db, strict=True)) or "true"
        return not isl.Set(f"{prefix}{{ {s.name}[{vs}] : {equal} }}").intersect(self.domain[s.name]).is_empty()

    def under(self, loop: int) -> list[Stmt]:
        return [s for s in self.stmts if loop in s.loops]

    def runs_at_most(self, loop: int, most: int) -> bool | None:
        """Whether the loop never runs more than `most` iterations that execute a statement each time it is entered
        (an unroll-and-jam remainder `for (i = n - n % 4; i < n; i++)` runs at most 3), whatever the parameters;
        None if unknown. Iterations whose statements are all skipped by an affine `if` do not count."""
        stmts = self.under(loop)
        if not self.known or not stmts:
            return None
        p = self.loops[loop].depth
        ran: isl.Set | None = None  # (outer variables, this variable) of the iterations that run a statement
        for s in stmts:
            part = self.domain[s.name].project_out(isl.dim_type.set, p + 1, len(s.loops) - p - 1).reset_tuple_id()
            ran = part if ran is None else ran.union(part)
        assert ran is not None
        prefix = f"[{', '.join(_param(x) for x in self.params)}] -> " if self.params else ""
        outer = "".join(f"o{k}, " for k in range(p))
        apart = isl.Map(f"{prefix}{{ [{outer}v] -> [{outer}w] : w - v >= {most * abs(self.loops[loop].step)} }}")
        return isl.Map.from_domain_and_range(ran, ran).intersect(apart).is_empty()

    def _restrict(self, stmts: list[Stmt], deps: isl.UnionMap | None = None) -> isl.UnionMap:
        dom = _union_set([self.domain[s.name] for s in stmts])
        return (self.deps if deps is None else deps).intersect_domain(dom).intersect_range(dom)

    def _time_deltas(self, stmts: list[Stmt], deps: isl.UnionMap | None = None) -> isl.Set:
        timed = self._restrict(stmts, deps).apply_domain(self.schedule).apply_range(self.schedule)
        found = timed.deltas().get_set_list()
        n = 2 * self.depth + 1
        return found.get_at(0) if found.n_set() else _set(self.params, n, "1 = 0")

    def _deps_except(self, ignore: frozenset[str]) -> isl.UnionMap:
        """The dependences through every object but those named in `ignore`."""
        kept = [(w, rel) for name, w, rel in self._rels if name not in ignore]
        writes = _union_map([r for w, r in kept if w]).intersect_domain(self.domains)
        reads = _union_map([r for w, r in kept if not w]).intersect_domain(self.domains)
        flow, anti, output = self._dependences(writes, reads)
        return flow.union(anti).union(output).coalesce()

    def parallel(self, loop: int, ignore: frozenset[str] = frozenset()) -> bool | None:
        """No dependence is carried by the loop (its iterations may run in any order); None if unknown.
        `ignore`: objects whose dependences do not count (the reduction and private variables a `parallel
        for` clause takes care of)."""
        if not self.known:
            return None
        lp = self.loops[loop]
        d = self._time_deltas(self.under(loop), self._deps_except(ignore) if ignore else None)
        level = 2 * lp.depth + 1
        zero = " and ".join(f"t{k} = 0" for k in range(level)) or "true"
        carried = _set(self.params, 2 * self.depth + 1, f"{zero} and t{level} != 0")
        return d.intersect(carried).is_empty()

    def privatizable(self, loop: int) -> frozenset[str] | None:
        """Arrays of the function that every iteration of the loop writes before it reads (written_first) and that
        the function names nowhere but inside the loop (and its declaration), so no value of them lives into or out
        of the loop. A private copy per thread (`private(sum)`) then computes what the shared array did. Arrays
        declared in the nest are fresh per iteration already (not listed). None if unknown."""
        first = self.written_first(loop)
        if first is None:
            return None
        out = set()
        for name in first:
            decl = self.declaration(name)
            if decl is not None and decl.where == "local" and decl.derivs and set(decl.derivs) == {"[]"} \
                    and self._only_inside(name, loop):
                out.add(name)
            elif name in self._builder.fresh and self.allocation(name) is not None and self._only_inside(name, loop, True):
                out.add(name)
        return frozenset(out)

    def allocation(self, name: str) -> str | None:
        """The declaration of a scratch block that an allocator returns (`double *sum = malloc(np * sizeof *sum);`,
        model._fresh), as text another place of the function may run again to get a block of its own: a declaration
        of that one name, whose initializer reads only names nothing in the function changes and that the function
        declares at most once (the same values there). None otherwise."""
        decl = self.declaration(name)
        if decl is None or decl.node is None or name not in self._builder.fresh:
            return None
        declarators = decl.node.children_by_field_name("declarator")
        if len(declarators) != 1:
            return None
        declarator = declarators[0]
        names = {_text(x) for x in _walk(declarator) if x.type == "identifier"} - {name}
        declared: dict[str, int] = {}
        for d in _walk(self.func):
            if d.type in ("declaration", "parameter_declaration"):
                for x in d.children_by_field_name("declarator"):
                    declared[_declarator(x)[0]] = declared.get(_declarator(x)[0], 0) + 1
        if names & _changed(self.func) or any(declared.get(x, 0) > 1 for x in names):
            return None
        return _text(decl.node)

    def written_first(self, loop: int) -> frozenset[str] | None:
        """Objects (arrays and scalars of the function, not those declared in the nest) that the statements under
        the loop write, and read only where written before: every element a statement under the loop reads was
        written before, in the same iteration of the loop (and of the loops around it), by a statement that runs
        every time and touches exactly that element. Private copies of them compute in each iteration what the
        shared objects did (their values after the loop aside). None if unknown."""
        if not self.known:
            return None
        p = self.loops[loop].depth
        under = _union_set([self.domain[s.name] for s in self.under(loop)])
        n = 2 * self.depth + 1
        a, b = ", ".join(f"t{k}" for k in range(n)), ", ".join(f"u{k}" for k in range(n))
        prefix = f"[{', '.join(_param(x) for x in self.params)}] -> " if self.params else ""
        same = " and ".join(f"u{k} = t{k}" for k in range(2 * p + 2))
        # read instance -> write instance before it in the same iteration of the loop
        earlier = isl.UnionMap(f"{prefix}{{ T[{a}] -> T[{b}] : {same} }}").intersect(self._schedule_space_gt(prefix, n))
        before = self.schedule.apply_range(earlier).apply_range(self.schedule.reverse())
        out = set()
        nest_own = {a.array.split("@")[0] for s in self.stmts for a in s.accesses if "@" in a.array}
        for name in sorted({x for x, w, _ in self._rels if w} - nest_own):
            mine = [(w, exact, rel) for (x, w, rel), exact in zip(self._rels, self._exact, strict=True) if x == name]
            if any(not exact for w, exact, _ in mine if not w):
                continue  # a read of any element (a subscript outside the model) or of a statement that may not run
            reads = _union_map([r for w, _, r in mine if not w]).intersect_domain(under)
            writes = _union_map([r for w, exact, r in mine if w and exact]).intersect_domain(under)
            covered = reads.apply_range(writes.reverse()).intersect(before).domain()
            if reads.domain().is_subset(covered):
                out.add(name)
        return frozenset(out)

    def _schedule_space_gt(self, prefix: str, n: int) -> isl.UnionMap:
        """{ T[t] -> T[u] : u lexicographically before t } in the 2d+1 schedule's space."""
        parts = []
        for k in range(n):
            eq = [f"u{m} = t{m}" for m in range(k)]
            parts.append("(" + " and ".join([*eq, f"u{k} < t{k}"]) + ")")
        a, b = ", ".join(f"t{k}" for k in range(n)), ", ".join(f"u{k}" for k in range(n))
        return isl.UnionMap(f"{prefix}{{ T[{a}] -> T[{b}] : {' or '.join(parts)} }}")

    def _only_inside(self, name: str, loop: int, freed: bool = False) -> bool:
        """The function names `name` only inside the loop and in its declarations (and, where `freed`, in statements
        `free(name);`)."""
        node = self.loops[loop].node
        for x in _walk(_field(self.func, "body")):
            if x.type != "identifier" or _text(x) != name or node.start_byte <= x.start_byte < node.end_byte:
                continue
            if x.parent is not None and (x.parent.type.endswith("declarator") or x.parent.type == "declaration"):
                continue
            call = x.parent.parent if x.parent is not None and x.parent.type == "argument_list" else None
            if freed and call is not None and _text(call) == f"free({name})" and call.parent is not None \
                    and call.parent.type == "expression_statement":
                continue
            return False
        return True

    def carried(self, loop: int) -> list[str] | None:
        """The kinds of dependence ('flow', 'anti', 'output') the loop carries; None if unknown."""
        if not self.known:
            return None
        out = []
        saved = self.deps
        for kind in ("flow", "anti", "output"):
            self.deps = getattr(self, kind)
            try:
                if not self.parallel(loop):
                    out.append(kind)
            finally:
                self.deps = saved
        return out

    def distributable(self, loop: int, later: list[Stmt]) -> bool | None:
        """Splitting the loop into two copies, the statements `later` (the end of its body) in the second,
        keeps every dependence: none goes from a later statement back to an earlier one within one
        iteration of the loops around it. None if unknown."""
        if not self.known:
            return None
        first = [s for s in self.under(loop) if s not in later]
        if not first or not later:
            return True
        back = self.deps.intersect_domain(_union_set([self.domain[s.name] for s in later])).intersect_range(
            _union_set([self.domain[s.name] for s in first]))
        found = back.apply_domain(self.schedule).apply_range(self.schedule).deltas().get_set_list()
        if not found.n_set():
            return True
        level = 2 * self.loops[loop].depth
        zero = " and ".join(f"t{k} = 0" for k in range(level + 1))
        return found.get_at(0).intersect(_set(self.params, 2 * self.depth + 1, zero)).is_empty()

    def bands(self) -> list[Band]:
        """Maximal perfect bands, outermost first (a loop whose body is one loop continues its band); none where the
        model over-approximates (its domains are not the loops' own)."""
        if not self.known or self.approximated:
            return []
        out = []
        starts = [lp.index for lp in self.loops if lp.parent is None or not self._perfect_child(lp.parent)]
        for start in starts:
            chain = [start]
            while (nxt := self._perfect_child(chain[-1])) is not None:
                chain.append(nxt)
            out.append(Band(tuple(chain), self._band_deltas(tuple(chain))))
        return out

    def _perfect_child(self, loop: int) -> int | None:
        body = _field(self.loops[loop].node, "body")
        items = [body] if body is not None and body.type != "compound_statement" else (
            [c for c in body.named_children if c.type != "comment"] if body is not None else [])
        if len(items) == 1 and items[0].type == "for_statement":
            return next(lp.index for lp in self.loops if lp.node == items[0])
        return None

    def band(self, loops: tuple[int, ...]) -> Band:
        return Band(loops, self._band_deltas(loops))

    def _band_deltas(self, loops: tuple[int, ...]) -> isl.Set | None:
        """Distances on the band's loops of the dependences not carried by loops outside it."""
        if not self.known or self.approximated:
            return None
        d = self._time_deltas(self.under(loops[0]))
        first = 2 * self.loops[loops[0]].depth + 1
        n = 2 * self.depth + 1
        zero = " and ".join(f"t{k} = 0" for k in range(first)) or "true"
        d = d.intersect(_set(self.params, n, zero))
        keep = [first + 2 * k for k in range(len(loops))]
        names = ", ".join(f"t{k}" for k in range(n))
        proj = isl.Map(f"[{', '.join(_param(p) for p in self.params)}] -> {{ T[{names}] -> B[{', '.join(f't{k}' for k in keep)}] }}")
        return d.apply(proj)

    def legal_permutation(self, band: Band, order: tuple[int, ...]) -> bool | None:
        """Running the band's loops in `order` (positions into band.loops, outermost first) keeps every
        dependence distance lexicographically non-negative; None if unknown."""
        if band.deltas is None:
            return None
        return band.deltas.intersect(_lex_negative(self.params, order)).is_empty()

    def permutable(self, band: Band) -> bool | None:
        """Fully permutable (tilable): every distance is non-negative on every loop of the band."""
        if band.deltas is None:
            return None
        d = len(band)
        return band.deltas.is_subset(_bset(self.params, d, " and ".join(f"b{k} >= 0" for k in range(d))))

    def parallel_in(self, band: Band, order: tuple[int, ...]) -> list[bool] | None:
        """For each position of the permuted band, whether that loop carries no band dependence."""
        if band.deltas is None:
            return None
        out = []
        for k in range(len(order)):
            zero = " and ".join(f"b{order[m]} = 0" for m in range(k)) or "true"
            out.append(band.deltas.intersect(_bset(self.params, len(band), f"{zero} and b{order[k]} != 0")).is_empty())
        return out

    def wavefront(self, band: Band, limit: int = 2) -> tuple[int, ...] | None:
        """Small positive coefficients h such that h . d >= 1 for every non-zero distance d: after the
        skew t = h . (band loops) as the outer loop, every other loop of the band is parallel. None if no
        such h up to `limit` (or unknown); () if the band has no dependence at all."""
        if band.deltas is None:
            return None
        d = len(band)
        nonzero = band.deltas.subtract(_bset(self.params, d, " and ".join(f"b{k} = 0" for k in range(d))))
        if nonzero.is_empty():
            return ()
        for h in sorted(itertools.product(range(1, limit + 1), repeat=d), key=lambda v: (sum(v), v)):
            dot = " + ".join(f"{c}*b{k}" for k, c in enumerate(h))
            if nonzero.intersect(_bset(self.params, d, f"{dot} <= 0")).is_empty():
                return h
        return None

    def skew(self, band: Band, limit: int = 2) -> list[list[int]] | None:
        """A unit lower-triangular skew T (entries below the diagonal in 0..limit) under which every
        distance is non-negative (the band becomes tilable); the identity if it already is; None if none."""
        if band.deltas is None:
            return None
        d = len(band)
        slots = [(r, c) for r in range(d) for c in range(r)]
        for values in sorted(itertools.product(range(limit + 1), repeat=len(slots)), key=lambda v: (sum(v), v)):
            t = [[int(r == c) for c in range(d)] for r in range(d)]
            for (r, c), v in zip(slots, values, strict=True):
                t[r][c] = v
            rows = " and ".join(" + ".join(f"{t[r][c]}*b{c}" for c in range(d)) + " >= 0" for r in range(d))
            if band.deltas.is_subset(_bset(self.params, d, rows)):
                return t
        return None

    def report(self) -> str:
        """A one-nest summary in words (for docs, logs and tests)."""
        if not self.known:
            return f"line {self.line + 1}: don't know ({self.reason})"
        lines = [f"line {self.line + 1}: " + ", ".join(
            f"{lp.var} {'parallel' if self.parallel(lp.index) else 'carries ' + '/'.join(self.carried(lp.index) or [])}"
            for lp in self.loops)]
        for band in self.bands():
            if len(band) < 2:
                continue
            names = [self.loops[i].var for i in band.loops]
            legal = ["-".join(names[k] for k in p) for p in itertools.permutations(range(len(band)))
                     if self.legal_permutation(band, p)]
            lines.append(f"  band {'-'.join(names)}: legal orders {', '.join(legal)}; "
                         f"{'tilable' if self.permutable(band) else 'not tilable'}; skew {self.skew(band)}; "
                         f"wavefront {self.wavefront(band)}")
        return "\n".join(lines)


def _shift(p: Poly, var: str) -> Poly:
    """p with var + 1 for var."""
    out: Poly = {}
    for m, c in p.items():
        term: Poly = {tuple(x for x in m if x != var): c}
        for _ in range(m.count(var)):
            term = _mul(term, {(var,): 1, (): 1})
        out = _add(out, term)
    return out


def _safe(name: str) -> str:
    return re.sub(r"\W", "_", name)


def _isl_expr_c(p: Poly) -> str:
    return " + ".join(("*".join(m) if c == 1 else f"{c}*{'*'.join(m)}" if m else str(c)) for m, c in p.items()) or "0"


def _union_set(sets: list[isl.Set]) -> isl.UnionSet:
    out = isl.UnionSet.from_set(sets[0])
    for s in sets[1:]:
        out = out.union(isl.UnionSet.from_set(s))
    return out


def _union_map(texts: list[str]) -> isl.UnionMap:
    """The union of maps written in isl's notation (each with its parameters and braces)."""
    out = isl.UnionMap("{ }")
    for t in texts:
        out = out.union(isl.UnionMap(t))
    return out


def _set(params: list[str], n: int, cond: str) -> isl.Set:
    names = ", ".join(f"t{k}" for k in range(n))
    return isl.Set(f"[{', '.join(_param(p) for p in params)}] -> {{ T[{names}] : {cond} }}")


def _bset(params: list[str], d: int, cond: str) -> isl.Set:
    names = ", ".join(f"b{k}" for k in range(d))
    return isl.Set(f"[{', '.join(_param(p) for p in params)}] -> {{ B[{names}] : {cond} }}")


def _lex_negative(params: list[str], order: tuple[int, ...]) -> isl.Set:
    d = len(order)
    parts = []
    for k in range(d):
        eq = [f"b{order[m]} = 0" for m in range(k)]
        parts.append("(" + " and ".join([*eq, f"b{order[k]} < 0"]) + ")")
    return _bset(params, d, " or ".join(parts))


def nests(source: str, assume_noalias: bool = False, approximate: bool = False) -> list[Nest]:
    """Every outermost `for` nest inside a function body, in source order. `assume_noalias` treats
    distinct pointer names as distinct objects even without `restrict` (the tuner does; the verifier
    then checks the candidate); each Nest records the pairs it assumed in `noalias_assumed`. `approximate`
    over-approximates where that stays sound instead of answering "don't know" (a subscript outside the model as
    any element of its array, a data-dependent loop bound as none): `parallel` and `privatizable` stay sound,
    and such a nest (`approximated`) has no bands (no loop move rewrites its loops)."""
    data = source.encode()
    tree = parse(data)
    out = []

    def add(n: ts.Node, func: ts.Node) -> None:
        nest = Nest(source, data, tree.root_node, func, n, assume_noalias, approximate)
        out.append(nest)
        if not nest.known:
            for inner in sweeps(n) or []:
                add(inner, func)

    for n in _walk(tree.root_node):
        if n.type != "for_statement":
            continue
        ups = _ancestors(n)
        func = next((a for a in ups if a.type == "function_definition"), None)
        if func is None or any(a.type == "for_statement" for a in ups) or any(a.type == "ERROR" for a in ups):
            continue
        add(n, func)
    return out


def sweeps(loop: ts.Node) -> list[ts.Node] | None:
    """The nests a loop runs one after another when nothing else in its body touches memory (a time loop: `for t {
    for i ...; for i ...; double *sw = src; src = dst; dst = sw; }`): the `for` statements directly in its body, when
    its other statements read and write only names (no subscript, dereference or call). A time loop the model cannot
    take whole (the swap) is analysed nest by nest, each for one iteration of it at a time, so a move on such a
    nest never crosses the time loop. None for any other loop."""
    body = _field(loop, "body")
    if body is None or body.type != "compound_statement":
        return None
    inner = []
    for s in body.named_children:
        if s.type == "for_statement":
            inner.append(s)
        elif s.type != "comment" and any(x.type in ("subscript_expression", "pointer_expression", "call_expression",
                                                    "field_expression") for x in _walk(s)):
            return None
    return inner or None
