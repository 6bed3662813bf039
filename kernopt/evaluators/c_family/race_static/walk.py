"""The walk of an OpenMP construct's statements for the static race check (kernopt/evaluators/c_family/race_static.py):
which constructs run its code (every thread, a work-sharing loop's iterations, one thread, a task), what they make
private and synchronize, and the phases that barriers, taskwaits and taskgroups cut it into; the accesses of its
expressions are recorded in that context (accesses)."""

from __future__ import annotations

from dataclasses import replace

import tree_sitter as ts

from kernopt.evaluators.c_family.race_static.accesses import _Accesses
from kernopt.evaluators.c_family.race_static.directives import _KNOWN, _PRIVATE_CLAUSES, _UNSUPPORTED, _const_clause, _Directive, _Source
from kernopt.evaluators.c_family.race_static.facts import _Checker
from kernopt.evaluators.c_family.race_static.records import Finding, _Ctx, _Loc, _LoopCtx
from kernopt.evaluators.c_family.race_static.syntax import _IDENT, _chain, _in, _loop_var, _root_ident, _strip, _target_name
from kernopt.tuner.cloops import _ancestors, _field, _text, _walk
from kernopt.tuner.deps import _declarator


class _UF:
    """The phases of a construct (union-find): a loop of the region's code around barriers joins its last phase
    to its first."""

    def __init__(self) -> None:
        self.p: list[int] = []

    def new(self) -> int:
        self.p.append(len(self.p))
        return len(self.p) - 1

    def find(self, x: int) -> int:
        while self.p[x] != x:
            self.p[x] = self.p[self.p[x]]
            x = self.p[x]
        return x

    def union(self, a: int, b: int) -> None:
        self.p[self.find(a)] = self.find(b)


class _Region(_Accesses):
    """One outermost construct: its accesses and what could not be proven."""

    def __init__(self, checker: _Checker, func: ts.Node, root_id: int) -> None:
        super().__init__(checker, func)
        self.uf = _UF()
        self.seg = self.uf.new()
        self.doubt = False
        self.serial = False
        self.loops: dict[int, _LoopCtx] = {}
        self.root_id = root_id

    # --- phases -----------------------------------------------------------------------------------
    def barrier(self, ctx: _Ctx, node: ts.Node | None) -> None:
        if ctx.barrier_ok:
            self.seg = self.uf.new()
        else:
            self.doubt = True

    # --- statements -------------------------------------------------------------------------------
    def stmt(self, node: ts.Node | None, ctx: _Ctx, skip: int = 0) -> _Ctx:
        """Walk one statement; returns the context for the statements after it (declarations add privates)."""
        if node is None:
            return ctx
        directives = self.src.on.get(node.id, [])[skip:]
        if directives:
            self.construct(node, directives[0], ctx, skip)
            return ctx
        t = node.type
        if t == "compound_statement":
            inner, prev = ctx, node.start_byte
            for child in node.named_children:
                if child.type == "comment":
                    continue
                self.standalone_between(prev, child.start_byte, inner)
                inner = self.stmt(child, inner)
                prev = child.end_byte
            self.standalone_between(prev, node.end_byte, inner)
            return ctx
        if t == "declaration":
            return self.declaration(node, ctx)
        if t == "expression_statement":
            for c in node.named_children:
                self.expr(c, ctx)
            return ctx
        if t == "if_statement":
            cond = _field(node, "condition")
            self.expr(cond, ctx)
            sel = ctx.selective or self.selects(cond, ctx)
            inner = replace(ctx, barrier_ok=False, selective=sel)
            self.stmt(_field(node, "consequence"), inner)
            alt = _field(node, "alternative")
            if alt is not None:
                self.stmt(alt.named_children[0] if alt.type == "else_clause" and alt.named_child_count else alt, inner)
            return ctx
        if t in ("for_statement", "while_statement", "do_statement"):
            self.seq_loop(node, ctx)
            return ctx
        if t == "return_statement":
            for c in node.named_children:
                self.expr(c, ctx)
            if ctx.who != "all" or not ctx.barrier_ok:
                self.unsure(node, "return", "leaves a construct early")
            return ctx
        if t in ("break_statement", "continue_statement", "empty_statement", "comment"):
            return ctx
        if t in ("preproc_def", "preproc_function_def", "preproc_call", "preproc_include"):
            return ctx
        if t.startswith("preproc_"):
            self.unsure(node, "preprocessor", "conditional compilation inside a construct (check the preprocessed kernel)")
            return ctx
        if t == "labeled_statement":
            self.unsure(node, "goto", "a label inside a parallel construct")
            return ctx
        if t == "function_definition":
            self.unsure(node, self.src.func_name(node) or "function", "a nested function (a gcc extension)")
            return ctx
        self.unsure(node, t.split("_")[0], "a statement the checker does not model")
        return ctx

    def standalone_between(self, lo: int, hi: int, ctx: _Ctx) -> None:
        """The stand-alone directives (barrier, taskwait, ...) between two statements of a block."""
        for d in self.src.standalone:
            if lo <= d.end <= hi:
                self.standalone(d, ctx)

    def standalone(self, d: _Directive, ctx: _Ctx) -> None:
        node = None
        if d.has("barrier"):
            if ctx.who != "all" or ctx.sync:
                self.doubt = True
            else:
                self.barrier(ctx, node)
        elif d.has("taskwait"):
            if "depend" in d.clauses:
                self.unknown.append(Finding(self.src.line(d.row), "taskwait", "a taskwait with depend"))
            elif ctx.barrier_ok or ctx.who in ("one", "master"):
                self.epochs[ctx.thread] = self.epochs.get(ctx.thread, 0) + 1
        elif d.has("flush", "taskyield"):
            pass
        elif d.has("threadprivate"):
            pass
        else:
            self.unknown.append(Finding(self.src.line(d.row), (d.words or ("omp",))[0] if _IDENT.fullmatch((d.words or ("omp",))[0]) else "omp",
                                        "an OpenMP directive the checker does not model"))

    def selects(self, cond: ts.Node | None, ctx: _Ctx) -> bool:
        """A condition that picks particular threads or iterations: it reads a private name outside a subscript."""
        for n in _walk(cond):
            if n.type == "identifier" and _text(n) in (ctx.private | set(ctx.loopvars) | ctx.tids) and not any(
                    a.type == "subscript_expression" and _in(n, _field(a, "index")) for a in _ancestors(n)):
                return True
            if n.type == "call_expression" and _text(_field(n, "function")) == "omp_get_thread_num":
                return True
        return False

    def declaration(self, node: ts.Node, ctx: _Ctx) -> _Ctx:
        static = any(c.type == "storage_class_specifier" and _text(c) in ("static", "extern") for c in node.children)
        names = set()
        for d in node.children_by_field_name("declarator"):
            name, derivs, _ = _declarator(d)
            if d.type == "function_declarator" or (derivs and derivs[0] == "()"):
                continue
            value = _field(d, "value") if d.type == "init_declarator" else None
            if static:
                if value is not None:
                    self.unsure(node, name, "a static local with an initializer inside a parallel construct")
                continue
            names.add(name)
            if value is not None:
                self.expr(value, ctx)
                v = _strip(value)
                if not derivs and v is not None and v.type == "call_expression" and \
                        _text(_field(v, "function")) == "omp_get_thread_num" and name not in self.written:
                    ctx = replace(ctx, tids=ctx.tids | {name})
                if derivs and derivs[0] == "*":
                    self.alias(name, value, ctx)
        return replace(ctx, private=ctx.private | names)

    def seq_loop(self, node: ts.Node, ctx: _Ctx) -> None:
        """A loop the current thread code runs itself: its variable is private if declared in its header;
        barriers inside a loop of the region's own code join the body's last phase to its first."""
        inner = replace(ctx, seqloops=(*ctx.seqloops, node.id), in_rep_loop=ctx.in_rep_loop or ctx.who == "all")
        if node.type == "for_statement":
            init = _field(node, "initializer")
            if init is not None and init.type == "declaration":
                inner = self.declaration(init, inner)
            elif init is not None:
                self.expr(init, inner)
            var = self.sweep_var(node, inner)
            if var:
                inner = replace(inner, sweeps=inner.sweeps | {var})
            self.expr(_field(node, "condition"), inner)
            body_ctx = inner
        else:
            body_ctx = inner
        entry = self.seg
        self.stmt(_field(node, "body"), body_ctx)
        if node.type == "for_statement":
            self.expr(_field(node, "update"), body_ctx)
        elif node.type == "while_statement":
            self.expr(_field(node, "condition"), body_ctx)
        else:
            self.expr(_field(node, "condition"), body_ctx)
        if self.seg != entry:
            self.uf.union(self.seg, entry)

    def sweep_var(self, node: ts.Node, ctx: _Ctx) -> str | None:
        """The variable of `for (v = lo; v < hi; v++)` with lo and hi the same in every thread and iteration and v
        private and not written in the body: the loop touches the same elements wherever it runs."""
        var = _loop_var(node)
        if not var or var not in ctx.private:
            return None
        body = _field(node, "body")
        if any(_target_name(n) == var for n in _walk(body)):
            return None
        init, cond = _field(node, "initializer"), _field(node, "condition")
        start = _field(init.named_children[-1], "value") if init is not None and init.type == "declaration" and \
            init.named_children and init.named_children[-1].type == "init_declarator" else _field(init, "right")
        bound = _field(cond, "right") if cond is not None and cond.type == "binary_expression" else None
        if start is None or bound is None or _text(_field(cond, "left")) != var:
            return None
        if self.invariant(start, ctx) and self.invariant(bound, ctx):
            return var
        return None

    # --- constructs -------------------------------------------------------------------------------
    def construct(self, node: ts.Node, d: _Directive, ctx: _Ctx, skip: int) -> None:
        words = set(d.words)
        line_node = node
        bad = (words - _KNOWN) | (words & _UNSUPPORTED)
        if bad:
            word = sorted(bad)[0]
            self.unsure(line_node, word if _IDENT.fullmatch(word) else "omp", "an OpenMP construct the checker does not model")
            return
        nxt = skip + 1
        privates = frozenset(d.names(*_PRIVATE_CLAUSES))
        self.reduced |= d.names("reduction", "in_reduction")
        if "depend" in d.clauses or "affinity" in d.clauses or "detach" in d.clauses:
            self.unsure(node, "depend", "a task with dependences")
            return
        if "task_reduction" in d.clauses:
            self.unsure(node, "task_reduction", "a task reduction")
            return
        if "parallel" in words:
            if node.id != self.root_id or skip != 0:
                self.unsure(node, "parallel", "a nested parallel region")
                return
            if any(_const_clause(d, c) == v for c, v in (("num_threads", 1), ("if", 0))):
                self.serial = True
            inner = replace(ctx, private=ctx.private | privates)
            rest = words - {"parallel"}
            if rest & {"for", "sections", "loop"}:
                self.worksharing(node, d, inner, words, skip, combined=True)
            elif rest - {"master", "masked"}:
                self.unsure(node, sorted(rest)[0], "an OpenMP construct the checker does not model")
            elif rest:
                self.one(node, d, inner, "master", nxt, skip_same=True)
            else:
                self.stmt(node, inner, nxt)
            return
        if words & {"for", "sections", "taskloop"}:
            self.worksharing(node, d, replace(ctx, private=ctx.private | privates), words, skip, combined=False)
            return
        if "simd" in words:
            var = _loop_var(node) if node.type == "for_statement" else ""
            self.stmt(node, replace(ctx, private=ctx.private | privates | ({var} if var else set())), nxt)
            return
        if words & {"single", "master", "masked"}:
            self.one(node, d, replace(ctx, private=ctx.private | privates), "one" if "single" in words else "master", nxt)
            return
        if "critical" in words:
            name = d.clauses.get("critical", [""])[0].strip()
            self.stmt(node, replace(ctx, sync=ctx.sync | {f"critical:{name}"}, barrier_ok=False), nxt)
            return
        if "atomic" in words:
            self.atomic(node, ctx, d)
            return
        if "ordered" in words:
            if ctx.ordered is None:
                self.unsure(node, "ordered", "an ordered block outside an ordered loop")
                return
            self.stmt(node, replace(ctx, sync=ctx.sync | {f"ordered:{ctx.ordered}"}, barrier_ok=False), nxt)
            return
        if "task" in words:
            self.task(node, d, ctx, privates, nxt)
            return
        if "taskgroup" in words:
            self.stmt(node, ctx, nxt)
            self.epochs[ctx.thread] = self.epochs.get(ctx.thread, 0) + 1
            return
        if "section" in words:
            self.stmt(node, ctx, nxt)
            return
        self.unsure(node, "omp", "an OpenMP construct the checker does not model")

    def one(self, node: ts.Node, d: _Directive, ctx: _Ctx, who: str, nxt: int, skip_same: bool = False) -> None:
        nowait = "nowait" in d.clauses
        multi = who == "one" and nowait and ctx.in_rep_loop
        inner = replace(ctx, who=who, cid=node.id if who == "one" else -1, multi=multi, thread=node.id if who == "one" else -1,
                        barrier_ok=False, loopvars=(), ordered=None)
        if ctx.who not in ("all",):
            self.unsure(node, "single" if who == "one" else "master", "a single or master construct inside another construct")
            return
        self.stmt(node, inner, nxt)
        if who == "one" and not nowait:
            self.barrier(ctx, node)

    def atomic(self, node: ts.Node, ctx: _Ctx, d: _Directive) -> None:
        """The statement's atomic location is synchronized; its other accesses are plain."""
        stmts = [c for c in node.named_children if c.type != "comment"] if node.type == "compound_statement" else [node]
        for s in stmts:
            e = s.named_children[0] if s.type == "expression_statement" and s.named_child_count else None
            target = self.atomic_target(e, d)
            if target is None:
                self.unsure(node, "atomic", "an atomic statement of a form the checker does not model")
                return
            key = _text(target)
            self.expr(e, ctx, atomic_key=key)

    @staticmethod
    def atomic_target(e: ts.Node | None, d: _Directive) -> ts.Node | None:
        if e is None:
            return None
        if e.type == "assignment_expression" and "write" in d.clauses:
            return _field(e, "left")
        if e.type == "assignment_expression" and "read" in d.clauses:
            return _field(e, "right")
        if e.type == "update_expression":
            return _field(e, "argument")
        if e.type == "assignment_expression":
            left, right = _field(e, "left"), _strip(_field(e, "right"))
            if _text(_field(e, "operator")) == "=" and right is not None:
                if right.type == "update_expression":
                    return _field(right, "argument")
                if right.type == "assignment_expression":
                    return _field(right, "left")
                if right.type in ("identifier", "subscript_expression", "pointer_expression", "field_expression") and \
                        left is not None and left.type == "identifier":
                    # `v = x` (read/capture) when v is a plain local; `x = v` (write) otherwise: both sides recorded
                    return right
            return left
        return None

    def worksharing(self, node: ts.Node, d: _Directive, ctx: _Ctx, words: set[str], skip: int, combined: bool) -> None:
        more = self.src.on.get(node.id, [])[skip + 1:]
        if any(set(x.words) - {"simd"} for x in more):
            self.unsure(node, "omp", "directives on a work-sharing construct the checker does not model")
            return
        nowait = "nowait" in d.clauses
        if "sections" in words:
            if node.type != "compound_statement":
                self.unsure(node, "sections", "a sections construct without a block")
                return
            outer = ctx
            if not combined and ctx.who != "all":
                self.unsure(node, "sections", "a work-sharing construct inside another construct")
                return
            for child in node.named_children:
                if child.type == "comment":
                    continue
                inner = replace(outer, who="one", cid=child.id, thread=child.id, multi=False, barrier_ok=False)
                self.stmt(child, inner, self._section_skip(child))
            if not nowait and not combined:
                self.barrier(ctx, node)
            return
        # a loop: for, parallel for, taskloop
        if node.type != "for_statement":
            self.unsure(node, "for", "a work-sharing directive not on a for loop")
            return
        if not combined and ctx.who != "all" and "taskloop" not in words:
            self.unsure(node, "for", "a work-sharing loop inside another construct")
            return
        if "taskloop" in words and "nogroup" in d.clauses:
            self.unsure(node, "taskloop", "a taskloop without its taskgroup (nogroup)")
            return
        if "ordered" in d.clauses and any(a.strip() for a in d.clauses["ordered"]):
            self.unsure(node, "ordered", "a doacross loop (ordered(n))")
            return
        k = _const_clause(d, "collapse") or 1
        chain = _chain(node, k)
        if chain is None:
            self.unsure(node, "collapse", "a collapsed nest that is not perfectly nested")
            return
        lvars = tuple(_loop_var(x) for x in chain)
        if not all(lvars):
            self.unsure(node, "for", "a work-sharing loop not in canonical form")
            return
        self.loops[node.id] = _LoopCtx(node, self.func, lvars, k)
        private = ctx.private | set(lvars)
        inner = replace(ctx, who="loop", cid=node.id, multi=True, private=frozenset(private), loopvars=lvars,
                        barrier_ok=False, ordered=node.id if "ordered" in d.clauses else None,
                        thread=node.id if "taskloop" in words else ctx.thread,
                        task=(ctx.thread, self.epochs.get(ctx.thread, 0), ctx.seqloops) if "taskloop" in words else ctx.task)
        # the loop's headers are evaluated by every thread (bounds read); the body per iteration
        for x in chain:
            init, cond, upd = _field(x, "initializer"), _field(x, "condition"), _field(x, "update")
            for part in (init, cond, upd):
                if part is not None and part.type != "declaration":
                    self.expr(part, inner, header=True)
                elif part is not None:
                    for dd in part.children_by_field_name("declarator"):
                        self.expr(_field(dd, "value"), inner)
        self.stmt(_field(chain[-1], "body"), inner, 0)
        # what the clauses write back: reductions (combined), lastprivate (one thread)
        back = d.names("reduction", "lastprivate") if not combined else set()
        for name in sorted(back):
            self.record(name, True, _Loc("scalar", inv=True), replace(ctx, sync=ctx.sync | {"atomic"}, private=ctx.private - {name},
                                                                       who=ctx.who), node)
        if "taskloop" in words:
            self.epochs[ctx.thread] = self.epochs.get(ctx.thread, 0) + 1
            for name in sorted(d.names("reduction")):
                self.record(name, True, _Loc("scalar", inv=True), ctx, node)
        elif not nowait and not combined:
            self.barrier(ctx, node)

    def _section_skip(self, child: ts.Node) -> int:
        ds = self.src.on.get(child.id, [])
        return 1 if ds and ds[0].has("section") else 0

    def task(self, node: ts.Node, d: _Directive, ctx: _Ctx, privates: frozenset[str], nxt: int) -> None:
        shared = d.names("shared")
        if shared & ctx.private:
            self.unsure(node, sorted(shared & ctx.private)[0], "a task shares a variable private to its generating thread")
            return
        gen = (ctx.thread, self.epochs.get(ctx.thread, 0), ctx.seqloops)
        # a task made once per iteration of a loop of one thread's code: its instances are that loop's iterations
        up = node.parent
        loop = None
        while up is not None and up.id != ctx.cid and up.type not in ("for_statement", "while_statement", "do_statement"):
            up = up.parent
        if up is not None and up.type == "for_statement" and ctx.who in ("one", "master") and \
                sum(1 for a in _ancestors(node) if a.type in ("for_statement", "while_statement", "do_statement")
                    and a.start_byte >= self._construct_start(ctx)) == 1:
            loop = up
        if loop is not None and _loop_var(loop) and _loop_var(loop) in ctx.private and \
                not any(_target_name(n) == _loop_var(loop) for n in _walk(_field(loop, "body"))):
            var = _loop_var(loop)
            self.loops[loop.id] = _LoopCtx(loop, self.func, (var,), 1)
            inner = replace(ctx, who="loop", cid=loop.id, multi=True, private=ctx.private | privates, loopvars=(var,),
                            barrier_ok=False, thread=node.id, task=gen, ordered=None, seqloops=())
        else:
            inner = replace(ctx, who="task", cid=node.id, multi=ctx.multi or ctx.who == "all" or bool(ctx.seqloops),
                            private=ctx.private | privates, barrier_ok=False, thread=node.id, task=gen, ordered=None,
                            seqloops=(), tids=frozenset())
        self.stmt(node, inner, nxt)

    def _construct_start(self, ctx: _Ctx) -> int:
        for n in _walk(self.func):
            if n.id == ctx.cid:
                return n.start_byte
        return 0


def _region_roots(src: _Source) -> list[tuple[ts.Node, ts.Node, bool]]:
    """(statement, function, orphaned) of each outermost OpenMP construct inside a function."""
    out = []
    for f in src.root.named_children:
        if f.type != "function_definition":
            continue
        for n in _walk(f):
            ds = src.on.get(n.id)
            if not ds:
                continue
            if any(src.on.get(a.id) for a in _ancestors(n) if a.start_byte >= f.start_byte and a.id != f.id):
                continue
            words = set(ds[0].words)
            if words <= {"simd", "declare"}:
                continue
            out.append((n, f, "parallel" not in words))
    return out


def _written(node: ts.Node) -> set[str]:
    """Names a construct assigns, increments or takes the address of (it may change them)."""
    out = set()
    for n in _walk(node):
        t = _target_name(n)
        if t:
            out.add(t)
        if n.type == "pointer_expression" and _text(_field(n, "operator")) == "&":
            root = _root_ident(_field(n, "argument"))
            if root:
                out.add(root)
    return out
