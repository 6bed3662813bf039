"""What the static race check (kernopt/evaluators/c_family/race_static.py) knows of the kernel file outside any
construct: what library functions do to memory, the names each function sees (declarations, pointers initialized
once outside a construct), summaries of the file's own functions (what they write through their pointer parameters
and to globals), and the dependence analysis (kernopt.tuner.deps) of a work-sharing loop."""

from __future__ import annotations

import re

import tree_sitter as ts

from kernopt.evaluators.c_family.race_static.directives import _Source
from kernopt.evaluators.c_family.race_static.records import _LoopCtx
from kernopt.evaluators.c_family.race_static.syntax import _args, _blank, _find, _root_ident, _strip, _target_name
from kernopt.tuner.cloops import _PARSER, _ancestors, _field, _text, _walk
from kernopt.tuner.deps import PURE, Nest, _declarator, _pure_functions

# Functions that read their arguments only and touch no memory of the caller's.
_READ_ONLY = PURE | frozenset(
    f + s for f in ("acos", "asin", "atan", "atan2", "cbrt", "ceil", "copysign", "cos", "cosh", "erf", "erfc", "exp",
                    "exp2", "expm1", "fabs", "fdim", "floor", "fma", "fmax", "fmin", "fmod", "hypot", "ldexp", "lgamma",
                    "log", "log10", "log1p", "log2", "logb", "lrint", "llrint", "lround", "llround", "nearbyint",
                    "nextafter", "pow", "remainder", "rint", "round", "scalbn", "sin", "sinh", "sqrt", "tan", "tanh",
                    "tgamma", "trunc", "asinh", "acosh", "atanh", "ilogb")
    for s in ("", "f", "l")) | frozenset({
        "abs", "labs", "llabs", "isnan", "isinf", "isfinite", "signbit", "fpclassify", "__builtin_expect",
        "__builtin_prefetch", "__builtin_fabs", "__builtin_sqrt", "__builtin_isnan", "__builtin_isinf",
        "__builtin_fma", "__builtin_fmax", "__builtin_fmin", "__builtin_assume_aligned", "__builtin_unreachable",
        "__builtin_popcount", "__builtin_popcountl", "__builtin_popcountll", "__builtin_clz", "__builtin_clzl",
        "__builtin_clzll", "__builtin_ctz", "__builtin_ctzl", "__builtin_ctzll", "memcmp", "strlen", "strcmp",
        "strncmp", "malloc", "calloc", "aligned_alloc", "free", "_mm_malloc", "_mm_free"})
# Library functions that store through some of their pointer arguments (argument indices), always.
_OUTPUT = {"modf": (1,), "modff": (1,), "modfl": (1,), "frexp": (1,), "frexpf": (1,), "frexpl": (1,),
           "sincos": (1, 2), "sincosf": (1, 2), "sincosl": (1, 2), "remquo": (2,), "remquof": (2,), "remquol": (2,),
           "lgamma_r": (1,), "lgammaf_r": (1,), "memcpy": (0,), "memmove": (0,), "memset": (0,), "strcpy": (0,),
           "strncpy": (0,), "strcat": (0,), "sprintf": (0,), "snprintf": (0,), "__builtin_memcpy": (0,),
           "__builtin_memmove": (0,), "__builtin_memset": (0,), "posix_memalign": (0,), "qsort": (0,)}
_ATOMIC_BUILTIN = re.compile(r"^__(atomic|sync)_\w+$")
_OMP_QUIET = re.compile(r"^omp_(get|in|is)_\w+$|^omp_set_(num_threads|dynamic|nested|schedule|max_active_levels)$")
_LOCK_FN = re.compile(r"^omp_(init|destroy|set|unset|test)(_nest)?_lock$")
_RUNTIME = re.compile(r"^(GOMP_\w+|__kmpc_\w+|pthread_create|thrd_create|clone|fork)$")


class _Checker:
    """The kernel file: its source, what holds outside any construct, and whether the construct being judged is
    orphaned."""

    def __init__(self, source: str) -> None:
        self.src = _Source(source)
        self.orphan = False
        self.pure = _pure_functions(self.src.root)
        self.enumerators = {_text(_field(n, "name")) for n in _walk(self.src.root) if n.type == "enumerator"}
        self.called: set[str] = {_text(_field(n, "function")) for n in _walk(self.src.root) if n.type == "call_expression"}
        self._summaries: dict[str, tuple[set[int], set[str], set[str], set[int]] | None] = {}
        self._decls: dict[int, dict[str, tuple[tuple[str, ...], ts.Node]]] = {}
        self.threadprivate: set[str] = set()
        for d in self.src.standalone:
            if d.has("threadprivate"):
                self.threadprivate |= {x.strip() for arg in d.clauses.get("threadprivate", []) for x in arg.split(",")}

    # --- declarations ------------------------------------------------------------------------------
    def decls(self, func: ts.Node) -> dict[str, tuple[tuple[str, ...], ts.Node]]:
        """Names visible in the function (globals, then its parameters and locals): derivations and declaration."""
        if func.id in self._decls:
            return self._decls[func.id]
        out: dict[str, tuple[tuple[str, ...], ts.Node]] = {}
        for d in _walk(self.src.root):
            if d.type not in ("declaration", "parameter_declaration"):
                continue
            owner = next((a for a in _ancestors(d) if a.type == "function_definition"), None)
            if owner is not None and owner.id != func.id:
                continue
            if owner is None and any(a.type == "function_declarator" for a in _ancestors(d)):
                continue
            for x in d.children_by_field_name("declarator"):
                name, derivs, _ = _declarator(x)
                if name:
                    out[name] = (derivs, d)
        self._decls[func.id] = out
        return out

    def pointer_like(self, name: str, func: ts.Node) -> bool:
        d = self.decls(func).get(name)
        return d is not None and bool(d[0])

    def pointer_rows(self, name: str, func: ts.Node) -> bool:
        d = self.decls(func).get(name)
        return d is not None and "*" in d[0][1:]

    def local_array(self, name: str, func: ts.Node, at: ts.Node) -> bool:
        d = self.decls(func).get(name)
        return d is not None and d[0][:1] == ("[]",) and d[1].type == "declaration"

    def outer_alias(self, name: str, func: ts.Node) -> tuple[str, str] | None:
        """A local pointer of the function declared outside the construct, initialized once and never changed:
        `double *p = &total;` ("addr", total) or `double *p = a + k;` ("any", a)."""
        d = self.decls(func).get(name)
        if d is None or not d[0] or d[0][0] != "*" or d[1].type != "declaration":
            return None
        if any(_target_name(n) == name for n in _walk(func)) or any(
                n.type == "pointer_expression" and _text(_field(n, "operator")) == "&" and _text(_field(n, "argument")) == name
                for n in _walk(func)):
            return ("?", "any")
        for x in d[1].children_by_field_name("declarator"):
            if x.type == "init_declarator" and _declarator(x)[0] == name:
                v = _strip(_field(x, "value"))
                if v is not None and v.type == "pointer_expression" and _text(_field(v, "operator")) == "&":
                    arg = _strip(_field(v, "argument"))
                    if arg is not None and arg.type == "identifier":
                        return (_text(arg), "addr")
                    while arg is not None and arg.type == "subscript_expression":
                        arg = _strip(_field(arg, "argument"))
                    if arg is not None and arg.type == "identifier":
                        return (_text(arg), "any")
                if v is not None and v.type == "call_expression" and \
                        _text(_field(v, "function")) in ("malloc", "calloc", "aligned_alloc", "_mm_malloc"):
                    return None  # fresh memory: an object of its own, named by the pointer
                while v is not None and v.type == "binary_expression":
                    v = _strip(_field(v, "left"))
                if v is not None and v.type == "identifier":
                    return (_text(v), "any")
                return ("?", "any")
        return ("?", "any")

    # --- function summaries ------------------------------------------------------------------------
    def summary(self, fname: str, depth: int = 0) -> tuple[set[int], set[str], set[str], set[int]] | None:
        """(parameters written through, globals written, globals read, parameters written on every call) of a
        function of this file with no OpenMP directive; None if unknown."""
        if fname in self._summaries:
            return self._summaries[fname]
        self._summaries[fname] = None  # recursion: unknown
        f = self.src.functions.get(fname)
        if f is None or depth > 4:
            return None
        if any(d.row >= f.start_point[0] and d.row <= f.end_point[0] for d in self.src.directives):
            return None
        decl = _field(f, "declarator")
        while decl is not None and decl.type != "function_declarator":
            decl = _field(decl, "declarator")
        plist = _field(decl, "parameters")
        params = [p for p in (plist.named_children if plist is not None else []) if p.type == "parameter_declaration"]
        pnames = [_declarator(_field(p, "declarator"))[0] for p in params]
        own = {_declarator(x)[0] for n in _walk(f) if n.type == "declaration" for x in n.children_by_field_name("declarator")}
        if any(n.type == "declaration" and any(c.type == "storage_class_specifier" and _text(c) == "static" for c in n.children)
               for n in _walk(f)):
            return None
        globals_ = {name for name, (_, d) in self.decls(f).items() if not any(a.type == "function_definition" for a in _ancestors(d))}
        writes: set[int] = set()
        definite: set[int] = set()
        gw: set[str] = set()
        gr: set[str] = set()
        body = _field(f, "body")
        if body is None:
            return None
        for n in _walk(body):
            if n.type == "call_expression":
                callee = _text(_field(n, "function"))
                if callee in self.pure or callee in _READ_ONLY or _OMP_QUIET.match(callee):
                    continue
                if callee in _OUTPUT or callee in self.src.functions:
                    # a pointer parameter handed on: written if the callee writes it (conservatively: yes)
                    for a in _args(n):
                        root = _root_ident(a)
                        if root in pnames:
                            writes.add(pnames.index(root))
                        elif root in globals_ and root not in own:
                            gw.add(root)
                    if callee in self.src.functions and self.summary(callee, depth + 1) is None:
                        return None
                    continue
                return None
            if n.type in ("assignment_expression", "update_expression"):
                t = _field(n, "left") if n.type == "assignment_expression" else _field(n, "argument")
                root = _root_ident(t)
                s = _strip(t)
                direct = s is not None and s.type == "identifier"
                if root in pnames and not direct:
                    i = pnames.index(root)
                    writes.add(i)
                    if not any(a.type in ("if_statement", "for_statement", "while_statement", "do_statement",
                                          "conditional_expression", "switch_statement") for a in _ancestors(n)
                               if a.start_byte >= body.start_byte):
                        definite.add(i)
                elif root in pnames and direct and self.pointer_like(root, f):
                    return None  # a pointer parameter moved: what it writes later is not its argument's
                elif root and root not in own and root not in pnames:
                    gw.add(root)
            elif n.type == "pointer_expression" and _text(_field(n, "operator")) == "&":
                root = _root_ident(_field(n, "argument"))
                if root not in own:
                    return None
            elif n.type == "identifier" and _text(n) in globals_ and _text(n) not in own and _text(n) not in pnames and \
                    not (n.parent is not None and n.parent.type == "call_expression"):
                gr.add(_text(n))
        for name in list(own):
            d = self.decls(f).get(name)
            if d is not None and d[0] and d[0][0] == "*" and d[1].type == "declaration":
                return None  # a local pointer: it may point into a parameter's memory
        result = (writes, gw, gr, definite)
        self._summaries[fname] = result
        return result

    # --- dependence analysis -----------------------------------------------------------------------
    def deps_parallel(self, lc: _LoopCtx, names: set[str]) -> tuple[set[str], str]:
        """The objects among `names` through which deps.py proves the work-sharing loop (all its collapsed loops)
        carries no dependence (only objects it models: a variable it takes for an inner loop's is not one), and
        why not the others ('' when all are proven)."""
        cannot = "the dependence analysis cannot model the work-sharing loop"
        fname = self.src.func_name(lc.func)
        noalias = fname not in self.called
        # locals of the function initialized with what the analysis cannot read (`long m = (long)sqrt(n);`) stand
        # for a parameter of the nest: their initializers are blanked in the text it reads (same offsets)
        spans = []
        for n in _walk(lc.func):
            if n.type == "init_declarator" and n.end_byte <= lc.node.start_byte and n.parent is not None and \
                    n.parent.type == "declaration" and not _declarator(n)[1]:
                v = _field(n, "value")
                if v is not None and any(x.type == "call_expression" for x in _walk(v)):
                    name_node = _field(n, "declarator")
                    if name_node is not None:
                        spans.append((name_node.end_byte, n.end_byte))
        data = _blank(self.src.data, spans) if spans else self.src.data
        tree = _PARSER.parse(data) if spans else self.src.tree
        node = _find(tree.root_node, lc.node.start_byte, lc.node.end_byte, "for_statement")
        func = _find(tree.root_node, lc.func.start_byte, lc.func.end_byte, "function_definition")
        if node is None or func is None:
            return set(), cannot
        nest = Nest(data.decode(errors="replace"), data, tree.root_node, func, node, noalias)
        if not nest.known:
            return set(), cannot
        objects = {a.array.split("@")[0] for s in nest.stmts for a in s.accesses}
        modelled = names & objects - {lp.var for lp in nest.loops}
        ignore = frozenset(x for s in nest.stmts for a in s.accesses for x in [a.array] if x.split("@")[0] not in modelled)
        levels = [i for i, lp in enumerate(nest.loops) if lp.depth < lc.collapse]
        if len(levels) != lc.collapse or not modelled:
            return set(), cannot
        for i in levels:
            verdict = nest.parallel(i, ignore)
            if verdict is None:
                return set(), cannot
            if not verdict:
                return set(), "iterations of the work-sharing loop may touch one element (a carried dependence)"
        return modelled, "" if modelled == names else cannot
