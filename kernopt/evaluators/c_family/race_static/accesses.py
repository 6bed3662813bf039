"""The accesses of a construct's expressions, for the static race check (kernopt/evaluators/c_family/race_static.py):
each read or write of an lvalue, through a subscript, a pointer, a member, a call's output pointer (library
functions, the file's own functions by their summaries, atomic builtins, vector intrinsics), with the object it
resolves to (aliases of pointers declared in the construct or outside it) and its element (a scalar, the same
element everywhere, this thread's, the work-sharing iteration's own, or any)."""

from __future__ import annotations

from dataclasses import replace

import tree_sitter as ts

from kernopt.evaluators.c_family.race_static.facts import (
    _ATOMIC_BUILTIN,
    _LOCK_FN,
    _OMP_QUIET,
    _OUTPUT,
    _READ_ONLY,
    _RUNTIME,
    _Checker,
)
from kernopt.evaluators.c_family.race_static.records import Finding, _Acc, _Ctx, _Loc
from kernopt.evaluators.c_family.race_static.syntax import _args, _const_bounds, _loop_var, _squash, _strip, _target_name
from kernopt.tuner.cloops import _ancestors, _field, _text, _walk


class _Accesses:
    """What the expressions of one construct touch, recorded as accesses in the context the walk of its statements
    and constructs (walk._Region) is in, and what could not be resolved."""

    def __init__(self, checker: _Checker, func: ts.Node) -> None:
        self.c = checker
        self.src = checker.src
        self.func = func
        self.seg = 0  # the phase the accesses are in (the walk starts a new one at each barrier)
        self.accs: list[_Acc] = []
        self.unknown: list[Finding] = []
        self.epochs: dict[int, int] = {}
        self.locks: set[str] = set()
        self.written: set[str] = set()
        self.aliases: dict[str, tuple[str, str, int | None]] = {}  # pointer -> (object, "addr"|"tid"|"any", K)
        self.reduced: set[str] = set()  # names of reduction clauses (array sections: the private copy)

    # --- bookkeeping ------------------------------------------------------------------------------
    def unsure(self, node: ts.Node | None, name: str, why: str) -> None:
        line = self.src.line(node) if node is not None else 0
        self.unknown.append(Finding(line, name, why))

    def record(self, name: str, write: bool, loc: _Loc, ctx: _Ctx, node: ts.Node, definite: bool = True) -> None:
        if name in ctx.private:
            return
        epoch = self.epochs.get(ctx.thread, 0)
        self.accs.append(_Acc(name, write, loc, replace(ctx, sync=ctx.sync | frozenset(f"lock:{x}" for x in self.locks)),
                              self.seg, epoch, self.src.line(node), node.id, definite))

    # --- pointers declared in the construct, values the same everywhere ---------------------------
    def alias(self, name: str, value: ts.Node, ctx: _Ctx) -> None:
        """A pointer declared in the construct: what it points into."""
        if name in self.written:
            return
        base, offset = self.pointer_base(value, ctx)
        if base is None:
            return
        if offset is not None:
            k = self.tid_stride(offset, ctx)
            if k is not None:
                self.aliases[name] = (base, "tid", k)
                return
        self.aliases[name] = (base, "any", None)

    def pointer_base(self, value: ts.Node | None, ctx: _Ctx) -> tuple[str | None, ts.Node | None]:
        v = _strip(value)
        if v is None:
            return None, None
        if v.type == "identifier":
            name = _text(v)
            if name in self.aliases:
                return self.aliases[name][0], None
            return (name, None) if name not in ctx.private else (None, None)
        if v.type == "binary_expression" and _text(_field(v, "operator")) in ("+", "-"):
            base, _ = self.pointer_base(_field(v, "left"), ctx)
            return base, _field(v, "right") if _text(_field(v, "operator")) == "+" else None
        if v.type == "pointer_expression" and _text(_field(v, "operator")) == "&":
            arg = _strip(_field(v, "argument"))
            if arg is not None and arg.type == "subscript_expression":
                base, _ = self.pointer_base(_field(arg, "argument"), ctx)
                return base, _field(arg, "index")
            if arg is not None and arg.type == "identifier":
                return _text(arg), None
        return None, None

    def tid_stride(self, offset: ts.Node, ctx: _Ctx) -> int | None:
        """K when `offset` is K * tid (tid: this thread's number), else None."""
        o = _strip(offset)
        if o is None:
            return None
        if self.is_tid(o, ctx):
            return 1
        if o.type == "binary_expression" and _text(_field(o, "operator")) == "*":
            a, b = _strip(_field(o, "left")), _strip(_field(o, "right"))
            for x, y in ((a, b), (b, a)):
                if x is not None and y is not None and self.is_tid(x, ctx) and y.type == "number_literal":
                    try:
                        return int(_text(y).rstrip("uUlL"), 0)
                    except ValueError:
                        return None
        return None

    def is_tid(self, n: ts.Node | None, ctx: _Ctx) -> bool:
        n = _strip(n)
        if n is None:
            return False
        if n.type == "identifier":
            return _text(n) in ctx.tids
        return n.type == "call_expression" and _text(_field(n, "function")) == "omp_get_thread_num" and \
            ctx.who != "task"

    def invariant(self, node: ts.Node | None, ctx: _Ctx, sweeps: bool = True) -> bool:
        """The expression has one value in every thread, iteration and instance (sweep variables aside)."""
        for n in _walk(node):
            if n.type == "identifier":
                name = _text(n)
                if n.parent is not None and n.parent.type == "call_expression" and _field(n.parent, "function") == n:
                    if name not in _READ_ONLY:
                        return False
                    continue
                if sweeps and name in ctx.sweeps:
                    continue
                if name in ctx.private or name in self.written or name in ctx.loopvars or name in ctx.tids:
                    return False
            elif n.type in ("assignment_expression", "update_expression"):
                return False
            elif n.type == "subscript_expression":
                base = _strip(_field(n, "argument"))
                if base is None or base.type != "identifier" or _text(base) in self.written or _text(base) in self.aliases:
                    return False
        return True

    # --- expressions ------------------------------------------------------------------------------
    def expr(self, node: ts.Node | None, ctx: _Ctx, atomic_key: str | None = None, header: bool = False) -> None:
        if node is None:
            return
        t = node.type
        if t in ("number_literal", "string_literal", "char_literal", "true", "false", "null", "comment",
                 "sizeof_expression", "type_descriptor", "concatenated_string", "alignof_expression"):
            return
        if t == "assignment_expression":
            left, right = _field(node, "left"), _field(node, "right")
            compound = _text(_field(node, "operator")) != "="
            self.lvalue(left, ctx, write=True, read=compound, atomic_key=atomic_key)
            self.expr(right, ctx, atomic_key)
            return
        if t == "update_expression":
            self.lvalue(_field(node, "argument"), ctx, write=True, read=True, atomic_key=atomic_key)
            return
        if t in ("identifier", "subscript_expression", "field_expression") or (
                t == "pointer_expression" and _text(_field(node, "operator")) == "*"):
            self.lvalue(node, ctx, write=False, read=True, atomic_key=atomic_key)
            return
        if t == "pointer_expression":  # &x outside a call: the address escapes
            arg = _strip(_field(node, "argument"))
            base = self.base_name(arg, ctx)
            if base is not None and base not in ctx.private:
                self.unsure(node, base, "its address is taken inside a parallel construct")
            self.subscripts_only(arg, ctx)
            return
        if t == "call_expression":
            self.call(node, ctx)
            return
        if t == "initializer_list" or t == "initializer_pair":
            for c in node.named_children:
                self.expr(c, ctx, atomic_key)
            return
        if t in ("compound_literal_expression", "statement_expression", "gnu_asm_expression"):
            self.unsure(node, "expression", "an expression the checker does not model")
            return
        for c in node.named_children:
            self.expr(c, ctx, atomic_key)

    def subscripts_only(self, node: ts.Node | None, ctx: _Ctx) -> None:
        n = node
        while n is not None and n.type in ("subscript_expression", "field_expression", "parenthesized_expression"):
            if n.type == "subscript_expression":
                self.expr(_field(n, "index"), ctx)
                n = _field(n, "argument")
            elif n.type == "field_expression":
                if _text(_field(n, "operator")) == "->":
                    self.expr(_field(n, "argument"), ctx)
                    return
                n = _field(n, "argument")
            else:
                n = n.named_children[0] if n.named_child_count else None

    def base_name(self, node: ts.Node | None, ctx: _Ctx) -> str | None:
        n = _strip(node)
        while n is not None and n.type in ("subscript_expression", "field_expression"):
            n = _strip(_field(n, "argument"))
        if n is not None and n.type == "pointer_expression" and _text(_field(n, "operator")) == "*":
            return self.base_name(_field(n, "argument"), ctx)
        if n is not None and n.type == "identifier":
            name = _text(n)
            return self.aliases[name][0] if name in self.aliases else name
        return None

    def lvalue(self, node: ts.Node | None, ctx: _Ctx, write: bool, read: bool, atomic_key: str | None = None,
               definite: bool = True) -> None:
        """Record the access an lvalue expression makes (and the reads its subscripts make)."""
        n = _strip(node)
        if n is None:
            return
        sync = ctx
        if atomic_key is not None and _text(node) == atomic_key:
            sync = replace(ctx, sync=ctx.sync | {"atomic"})
        if n.type == "identifier":
            name = _text(n)
            if name in ctx.private or self.is_constant(name):
                return
            if not write and self.c.pointer_like(name, self.func) and name not in self.written:
                return  # the value of a pointer (or an array's address) no one changes: not its elements
            self.record(name, write, _Loc("scalar", inv=True), sync, n, definite)
            return
        if n.type == "subscript_expression":
            subs: list[ts.Node] = []
            b: ts.Node | None = n
            while b is not None and b.type == "subscript_expression":
                idx = _field(b, "index")
                if idx is not None:
                    subs.insert(0, idx)
                    self.expr(idx, ctx)
                b = _strip(_field(b, "argument"))
            self.element(b, subs, n, ctx, sync, write, definite)
            return
        if n.type == "pointer_expression" and _text(_field(n, "operator")) == "*":
            arg = _strip(_field(n, "argument"))
            if arg is not None and arg.type == "identifier":
                self.element(arg, [], n, ctx, sync, write, definite)
                return
            if arg is not None and arg.type == "binary_expression" and _text(_field(arg, "operator")) == "+":
                left, right = _strip(_field(arg, "left")), _field(arg, "right")
                if left is not None and left.type == "identifier":
                    self.expr(right, ctx)
                    self.element(left, [right] if right is not None else [], n, ctx, sync, write, definite)
                    return
            self.unsure(n, "pointer", "a store or load through a pointer expression the checker cannot resolve")
            self.expr(arg, ctx)
            return
        if n.type == "field_expression":
            base = _strip(_field(n, "argument"))
            if _text(_field(n, "operator")) == "->":
                if base is not None and base.type == "identifier":
                    name = _text(base)
                    if name in ctx.private and name not in self.aliases:
                        self.unsure(n, name, "a member reached through a pointer the checker cannot resolve")
                        return
                    root = self.aliases[name][0] if name in self.aliases else name
                    self.record(root, write, _Loc("elem", key=_squash(_text(n)), inv=self.invariant(n, ctx, False)),
                                sync, n, definite)
                    return
                self.unsure(n, "member", "a member reached through a pointer the checker cannot resolve")
                self.expr(base, ctx)
                return
            member_root = self.base_name(base, ctx)
            if member_root is None:
                self.unsure(n, "member", "a member of an expression the checker cannot resolve")
                return
            root = member_root
            if root in ctx.private:
                self.subscripts_only(base, ctx)
                return
            self.subscripts_only(base, ctx)
            self.record(root, write, _Loc("elem", key=_squash(_text(n)), inv=self.invariant(n, ctx, False)), sync, n, definite)
            return
        if n.type in ("call_expression",):
            self.call(n, ctx)
            if write:
                self.unsure(n, "call", "a store through a pointer a call returns")
            return
        if n.type == "conditional_expression":
            self.unsure(n, "conditional", "a store through a conditional expression")
            return
        self.expr(n, ctx)

    def is_constant(self, name: str) -> bool:
        """An enumerator or a name the file declares nowhere (a macro expanded away cannot be one)."""
        return name in self.c.enumerators

    def element(self, base: ts.Node | None, subs: list[ts.Node], node: ts.Node, ctx: _Ctx, sync: _Ctx, write: bool,
                definite: bool) -> None:
        if base is None or base.type != "identifier":
            self.unsure(node, "pointer", "a subscript of an expression the checker cannot resolve")
            if base is not None:
                self.expr(base, ctx)
            return
        name = _text(base)
        if name in self.aliases:
            target, how, k = self.aliases[name]
            if how == "tid" and k is not None and len(subs) <= 1:
                j = subs[0] if subs else None
                if j is None or self.within(j, k, ctx):
                    self.record(target, write, _Loc("elem", key=f"tid:{name}:{_squash(_text(j)) if j is not None else '0'}",
                                                    tid=True), sync, node, definite)
                    return
            if target in ctx.private:
                return
            self.record(target, write, _Loc("elem", key=f"via:{name}:{node.id}"), sync, node, definite)
            return
        if name in ctx.private:
            if self.c.pointer_like(name, self.func) and not self.c.local_array(name, self.func, node) and \
                    name not in self.reduced:
                self.unsure(node, name, "a store or load through a private pointer the checker cannot resolve")
            return
        if name in self.written and self.c.pointer_like(name, self.func):
            self.unsure(node, name, "a pointer that the construct reassigns")
            return
        outer = self.c.outer_alias(name, self.func)
        if outer is not None:
            target, how = outer
            if how == "addr" and not subs:
                self.record(target, write, _Loc("scalar", inv=True), sync, node, definite)
                return
            if how == "addr" and len(subs) == 1 and _text(_strip(subs[0])) == "0":
                self.record(target, write, _Loc("scalar", inv=True), sync, node, definite)
                return
            self.record(target, write, _Loc("elem", key=f"via:{name}:{node.id}"), sync, node, definite)
            return
        if not subs:  # *p on a pointer variable shared by the team: its first element
            self.record(name, write, _Loc("elem", key="0", inv=True, const=0), sync, node, definite)
            return
        if len(subs) > 1 and self.c.pointer_rows(name, self.func):
            self.unsure(node, name, "an array of pointers (rows that may overlap)")
            self.record(name, write, _Loc("any"), sync, node, definite)
            return
        key = ",".join(_squash(_text(s)) for s in subs)
        inv = all(self.invariant(s, ctx) for s in subs)
        sweep = inv and not all(self.invariant(s, ctx, sweeps=False) for s in subs)
        const = None
        first = _strip(subs[0]) if len(subs) == 1 else None
        if first is not None and first.type == "number_literal":
            try:
                const = int(_text(first).rstrip("uUlL"), 0)
            except ValueError:
                const = None
        tid = self.is_tid(subs[0], ctx)
        own = False
        if ctx.who == "loop" and ctx.loopvars and len(subs) >= len(ctx.loopvars):
            lead = [_strip(s) for s in subs[:len(ctx.loopvars)]]
            own = all(x is not None and x.type == "identifier" for x in lead) and \
                sorted(_text(x) for x in lead if x is not None) == sorted(ctx.loopvars)
        self.record(name, write, _Loc("elem", key=key, inv=inv, tid=tid, own=own, sweep=sweep, const=const), sync, node, definite)

    def within(self, j: ts.Node, k: int, ctx: _Ctx) -> bool:
        """0 <= j < k for every value j takes: a constant, or the variable of an enclosing loop `for (v = a; v < b; ...)`
        with constant a >= 0 and b <= k, counting up, not written in its body."""
        s = _strip(j)
        if s is None:
            return False
        if s.type == "number_literal":
            try:
                return 0 <= int(_text(s).rstrip("uUlL"), 0) < k
            except ValueError:
                return False
        if s.type != "identifier":
            return False
        var = _text(s)
        for a in _ancestors(s):
            if a.type == "for_statement" and _loop_var(a) == var:
                lo, hi, incl = _const_bounds(a)
                body = _field(a, "body")
                if lo is None or hi is None or any(_target_name(n) == var for n in _walk(body)):
                    return False
                return lo >= 0 and (hi + (1 if incl else 0)) <= k
        return False

    def call(self, node: ts.Node, ctx: _Ctx) -> None:
        fn = _field(node, "function")
        fname = _text(fn) if fn is not None and fn.type == "identifier" else ""
        args = _args(node)
        if not fname:
            self.unsure(node, "call", "a call through a function pointer")
            for a in args:
                self.expr(a, ctx)
            return
        if _RUNTIME.match(fname):
            self.unsure(node, fname, "calls the threading runtime directly")
            return
        if _LOCK_FN.match(fname):
            lock = self.base_name(_field(args[0], "argument") if args and args[0].type == "pointer_expression" else
                                  (args[0] if args else None), ctx)
            shared = lock is not None and lock not in ctx.private
            if fname in ("omp_set_lock", "omp_set_nest_lock") and shared and lock is not None:
                self.locks.add(lock)
            elif fname in ("omp_unset_lock", "omp_unset_nest_lock") and lock is not None:
                self.locks.discard(lock)
            elif fname.startswith("omp_test"):
                self.unsure(node, fname, "a lock taken with omp_test_lock")
            return
        if _OMP_QUIET.match(fname) or fname == "omp_get_thread_num":
            return
        if _ATOMIC_BUILTIN.match(fname):
            for i, a in enumerate(args):
                if i == 0:
                    self.pointer_arg(a, replace(ctx, sync=ctx.sync | {"atomic"}), write=True, definite=True)
                else:
                    self.expr(a, ctx)
            return
        if fname in _OUTPUT:
            for i, a in enumerate(args):
                if i in _OUTPUT[fname]:
                    self.pointer_arg(a, ctx, write=True, definite=True)
                elif _pointerish(a, self.c, self.func):
                    self.pointer_arg(a, ctx, write=False, definite=True)
                else:
                    self.expr(a, ctx)
            return
        if fname in self.c.pure or (fname in _READ_ONLY and fname not in self.c.src.functions):
            for a in args:
                if _pointerish(a, self.c, self.func):
                    self.pointer_arg(a, ctx, write=False, definite=True)
                else:
                    self.expr(a, ctx)
            return
        if fname.startswith(("_mm", "__builtin_ia32")):
            self.intrinsic(node, fname, args, ctx)
            return
        summary = self.c.summary(fname)
        if summary is None:  # the kernel's own functions are compiled (and watched by the sanitizer) with it; others are not
            self.unsure(node, fname, "a call to a function of the kernel the checker cannot summarize"
                        if fname in self.c.src.functions else "a call to a function the checker does not know")
            for a in args:
                self.expr(a, ctx)
            return
        writes, globals_written, globals_read, definite = summary
        for i, a in enumerate(args):
            if i in writes:
                self.pointer_arg(a, ctx, write=True, definite=i in definite)
            elif _pointerish(a, self.c, self.func):
                self.pointer_arg(a, ctx, write=False, definite=True)
            else:
                self.expr(a, ctx)
        for g in sorted(globals_written):
            self.record(g, True, _Loc("any"), ctx, node, definite=False)
        for g in sorted(globals_read):
            self.record(g, False, _Loc("any"), ctx, node)

    def intrinsic(self, node: ts.Node, fname: str, args: list[ts.Node], ctx: _Ctx) -> None:
        """Vector intrinsics: loads read through their pointer argument, stores write through it."""
        low = fname.lower()
        store = any(w in low for w in ("store", "stream", "scatter", "maskmov"))
        load = any(w in low for w in ("load", "gather", "lddqu", "broadcast_s", "broadcast_p"))
        for i, a in enumerate(args):
            pointer_first = i == 0 and (store or load) and a.type in ("pointer_expression", "binary_expression",
                                                                    "cast_expression", "identifier")
            if _pointerish(a, self.c, self.func) or pointer_first:
                self.pointer_arg(a, ctx, write=store and i == 0, definite=True)
            else:
                self.expr(a, ctx)

    def pointer_arg(self, a: ts.Node, ctx: _Ctx, write: bool, definite: bool) -> None:
        """A pointer passed to a call that reads (or writes) what it points to: &x, &a[i], a + i, a."""
        s = _strip(a)
        if s is None:
            return
        if s.type == "pointer_expression" and _text(_field(s, "operator")) == "&":
            target = _strip(_field(s, "argument"))
            if target is not None and target.type in ("identifier", "subscript_expression", "field_expression") or (
                    target is not None and target.type == "pointer_expression"):
                self.lvalue(target, ctx, write=write, read=not write, definite=definite)
                return
            self.unsure(s, "pointer", "a pointer argument the checker cannot resolve")
            return
        if s.type == "identifier":
            name = _text(s)
            if name in ctx.private and name not in self.aliases:
                if self.c.pointer_like(name, self.func) and not self.c.local_array(name, self.func, s):
                    self.unsure(s, name, "a private pointer passed to a call")
                return
            base = self.base_name(s, ctx)
            if base is None or base in ctx.private:
                return
            outer = self.c.outer_alias(name, self.func)
            if outer is not None and outer[1] == "addr":
                self.record(outer[0], write, _Loc("scalar", inv=True), ctx, s, definite)
                return
            self.record(base, write, _Loc("any"), ctx, s, definite)
            return
        if s.type == "binary_expression" and _text(_field(s, "operator")) in ("+", "-"):
            base = self.base_name(_field(s, "left"), ctx)
            self.expr(_field(s, "right"), ctx)
            if base is None:
                self.unsure(s, "pointer", "a pointer argument the checker cannot resolve")
                return
            if base not in ctx.private:
                self.record(base, write, _Loc("any"), ctx, s, definite)
            return
        self.unsure(s, "pointer", "a pointer argument the checker cannot resolve")


def _pointerish(a: ts.Node, c: _Checker, func: ts.Node) -> bool:
    s = _strip(a)
    if s is None:
        return False
    if s.type == "pointer_expression" and _text(_field(s, "operator")) == "&":
        return True
    if s.type == "identifier":
        return c.pointer_like(_text(s), func)
    if s.type == "binary_expression" and _text(_field(s, "operator")) in ("+", "-"):
        left = _strip(_field(s, "left"))
        return left is not None and left.type == "identifier" and c.pointer_like(_text(left), func)
    return False
