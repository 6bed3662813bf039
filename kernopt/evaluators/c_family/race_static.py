"""A static race check of an OpenMP kernel's source: the data sharing of every parallel construct.

`check(source)` reads the kernel as the production compiler preprocessed it (race.preprocess: macros expanded,
conditionals decided, `#line` markers; plain sources work too) and judges every OpenMP construct without running
anything, so a kernel cannot behave one way when watched and another when not (a sanitizer-heap test, a store
through an uninstrumented library call such as `modf(x, &shared)`).

What it models. Each outermost `parallel` construct (and each orphaned work-sharing or tasking construct, as if a
team ran it) is walked once. Every memory access inside it, through functions of the file it calls (a summary of
what they write through their pointer parameters and to globals) and through library calls with output pointers
(modf, frexp, sincos, memcpy/memset destinations, ...), is recorded with:
- the object (a variable, or the array a subscript or a pointer resolves to) and whether it is private to the
  thread: declared in the construct (not `static`), a work-sharing loop's variable, listed in a
  private/firstprivate/lastprivate/linear/reduction clause, `threadprivate`;
- its element: a scalar, a subscript that is the same in every thread and iteration (no private or written name),
  one whose leading index is this thread's number (`t = omp_get_thread_num()`, never reassigned; a pointer
  `w + K * omp_get_thread_num()` indexed in [0, K)), one whose leading indices are the work-sharing loop's
  variables (collapse(k): all k), or anything else;
- who runs it: every thread (the region's own code), the iterations of one work-sharing loop (a `for`, a
  `taskloop`, or tasks created one per iteration of a loop in a `single`), one thread (`single`, `master`, a
  `section`), or a task; its synchronization (`atomic`, `critical(name)`, `ordered`, an OpenMP lock shared by the
  team); and its phase: barriers (explicit, and the implicit ones of `for`/`sections`/`single` without `nowait`)
  cut the region into phases, a loop of the region's code around barriers joins its last phase to its first, and
  `taskwait` (or the end of a `taskgroup`/`taskloop`) orders a generating thread's later code after its tasks.

Two accesses of one shared object, one a write, race when they may run at once on two threads (same phase, not
ordered by taskwait, not one thread's, not both under one atomic/critical/ordered/lock) and may touch one element.
They do not when both are per-thread elements, or both are in one work-sharing loop and either both are the
iteration's own elements or the polyhedral dependence analysis (kernopt.agent.deps) proves the loop carries no
dependence through the object (collapse(k): none of its k loops).

Verdicts. `race`: some conflict is certain: a shared scalar, or an element whose subscript is the same in every
thread or iteration, written without synchronization (or written under one and read without) where several
threads or iterations run it, not under a condition that picks particular threads or iterations, in a region
whose barriers are all understood. `unknown`: something could not be proven (a subscript the analysis cannot
model, an indirect subscript `a[idx[i]]`, a carried dependence, a call to an unknown function, a pointer it cannot
resolve, a task with `depend`, `teams`/`target`, a direct call to the threading runtime); the findings say where.
`proven`: every access of every construct is proven safe. `none`: no OpenMP construct and no direct call into a
threading runtime. "Don't know" is never "proven".

Assumption: the pointer parameters of a function no other function of the file calls (the kernel the harness
calls) point to distinct objects (the tasks' contract; every task signature declares them `restrict`); a
function the file calls itself gets no such assumption.

How the static and dynamic verdicts combine (for the evaluator): a race found by either is a race; `proven` plus a
clean (or unavailable) sanitizer run is race-free; `unknown` plus a clean sanitizer run is race-free by the
dynamic check alone, and says so with the static findings (the sanitizer can be dodged; bench/race_static_share.py
measures how often honest candidates land there); `unknown` with the sanitizer unavailable is unavailable.

Findings carry only the checker's own fixed phrases, identifiers that match [A-Za-z_][A-Za-z0-9_]*, and line
numbers of the kernel source (from its `#line` markers): nothing else of the candidate's text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Literal

import tree_sitter as ts

from kernopt.agent.cloops import _PARSER, _ancestors, _field, _text, _walk
from kernopt.agent.deps import PURE, Nest, _declarator, _pure_functions

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HASH_LINE = re.compile(rb"(?m)^[ \t]*#.*$")
_OMP_LINE = re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+omp\b(.*)$")
_LINE_MARK = re.compile(r"^[ \t]*#[ \t]*(?:line[ \t]+)?(\d+)\b")  # `#line 12 "kernel.c"`, `# 12 "kernel.c" 1`

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
_STATEMENTS = ("expression_statement", "compound_statement", "for_statement", "if_statement", "while_statement",
               "do_statement", "declaration", "return_statement", "switch_statement", "break_statement",
               "continue_statement", "goto_statement", "labeled_statement", "empty_statement")
# Directive words; anything else at the head of a directive is unknown to the checker.
_KNOWN = {"parallel", "for", "simd", "sections", "section", "single", "master", "masked", "critical", "atomic",
          "barrier", "taskwait", "taskgroup", "task", "taskloop", "ordered", "flush", "threadprivate", "taskyield",
          "declare"}
_UNSUPPORTED = {"teams", "target", "distribute", "loop", "scan", "cancel", "cancellation", "metadirective",
                "workshare", "scope", "tile", "unroll", "requires", "allocate", "depobj", "error", "assume",
                "assumes", "interop", "dispatch", "begin", "end", "nothing", "declare"}
_BARE_CLAUSES = {"nowait", "untied", "mergeable", "nogroup", "seq_cst", "read", "write", "update", "capture",
                 "compare", "relaxed", "acquire", "release", "acq_rel", "inbranch", "notinbranch", "threads",
                 "weak", "fail"}
_PRIVATE_CLAUSES = ("private", "firstprivate", "lastprivate", "linear", "reduction", "in_reduction", "copyprivate")
_ATOMIC_KINDS = ("read", "write", "update", "capture", "compare")

Kind = Literal["proven", "race", "unknown", "none"]


@dataclass(frozen=True)
class Finding:
    """One place: a line of the kernel source, the shared variable or array, and why (the checker's own words)."""

    line: int
    name: str
    why: str

    def __post_init__(self) -> None:
        if not _IDENT.fullmatch(self.name):
            object.__setattr__(self, "name", "?")


@dataclass(frozen=True)
class StaticVerdict:
    verdict: Kind
    findings: tuple[Finding, ...]  # race: the racy places; unknown: what could not be proven
    regions: int  # how many parallel constructs were analysed

    def summary(self) -> str:
        """One line per finding (the checker's phrases, identifiers and line numbers only)."""
        head = f"static race check: {self.verdict} ({self.regions} construct(s))"
        return "\n".join([head, *(f"line {f.line}: `{f.name}` {f.why}" for f in self.findings[:20])])


class _Unknown(Exception):
    def __init__(self, node: ts.Node | None, name: str, why: str) -> None:
        super().__init__(why)
        self.node, self.name, self.why = node, name, why


@dataclass
class _Directive:
    row: int
    end: int  # byte offset of the line's end
    words: tuple[str, ...]
    clauses: dict[str, list[str]]  # clause name -> argument texts (one per occurrence)
    text: str

    def has(self, *ws: str) -> bool:
        return any(w in self.words for w in ws)

    def names(self, *clauses: str) -> set[str]:
        out: set[str] = set()
        for c in clauses:
            for arg in self.clauses.get(c, []):
                body = arg.split(":", 1)[1] if c in ("reduction", "in_reduction", "task_reduction") and ":" in arg else arg
                if c == "linear":
                    body = body.split(":", 1)[0]
                    body = re.sub(r"\b(val|ref|uval)\s*\(", "", body)
                if c == "lastprivate" and ":" in body:
                    body = body.split(":", 1)[1]
                for item in _split_top(body):
                    m = _IDENT.match(item.strip().lstrip("(&*").strip())
                    if m:
                        out.add(m.group())
        return out


def _split_top(s: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return [x for x in out if x.strip()]


def _parse_directive(text: str, row: int, end: int) -> _Directive:
    words: list[str] = []
    clauses: dict[str, list[str]] = {}
    i = 0
    s = text.replace(",", " ")
    while i < len(s):
        m = re.compile(r"\s*([A-Za-z_]\w*)\s*").match(s, i)
        if not m:
            if s[i:].strip():
                words.append("?")
            break
        word, j = m.group(1), m.end()
        if j < len(s) and s[j] == "(":
            depth, k = 0, j
            while k < len(s):
                depth += s[k] == "("
                depth -= s[k] == ")"
                if depth == 0:
                    break
                k += 1
            arg = text[j + 1:k]  # the original text (commas kept)
            if word == "critical" and not clauses and words == []:
                words.append("critical")
            clauses.setdefault(word, []).append(arg)
            i = k + 1
            continue
        if word in _BARE_CLAUSES or clauses or (word == "ordered" and words):  # `for ordered`: the clause
            clauses.setdefault(word, []).append("")
        else:
            words.append(word)
        i = j
    return _Directive(row, end, tuple(words), clauses, text)


@dataclass(frozen=True)
class _Loc:
    kind: str  # "scalar" | "elem" | "any"
    key: str = ""
    inv: bool = False  # the same element(s) in every thread, iteration and instance
    tid: bool = False  # this thread's own element
    own: bool = False  # the work-sharing iteration's own element
    sweep: bool = False  # inv through the variables of loops inside the instance
    const: int | None = None


@dataclass(frozen=True)
class _Ctx:
    who: str  # "all" | "loop" | "one" | "master" | "task"
    cid: int  # the construct (a loop ctx: the loop's node id)
    multi: bool  # several instances may run at once
    thread: int  # the sequential code's construct (epochs of taskwait count per thread code)
    private: frozenset[str] = frozenset()
    tids: frozenset[str] = frozenset()
    loopvars: tuple[str, ...] = ()
    sweeps: frozenset[str] = frozenset()
    sync: frozenset[str] = frozenset()
    barrier_ok: bool = True
    selective: bool = False
    seqloops: tuple[int, ...] = ()
    task: tuple[int, int, tuple[int, ...]] | None = None  # (generating thread code, its epoch, its loops)
    in_rep_loop: bool = False
    ordered: int | None = None  # the loop whose `ordered` blocks exclude one another


@dataclass
class _Acc:
    name: str
    write: bool
    loc: _Loc
    ctx: _Ctx
    seg: int
    epoch: int
    line: int
    node_id: int
    definite: bool = True


@dataclass
class _LoopCtx:
    node: ts.Node
    func: ts.Node
    vars: tuple[str, ...]
    collapse: int


class _UF:
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


def _strip(node: ts.Node | None) -> ts.Node | None:
    while node is not None and node.type in ("parenthesized_expression", "cast_expression"):
        node = _field(node, "value") if node.type == "cast_expression" else (
            node.named_children[0] if node.named_child_count == 1 else None)
    return node


def _blank(data: bytes, spans: list[tuple[int, int]]) -> bytes:
    b = bytearray(data)
    for s, e in spans:
        b[s:e] = b" " * (e - s)
    return bytes(b)


class _Source:
    """The kernel's text, tree, OpenMP directives and line map."""

    def __init__(self, source: str) -> None:
        self.source = source
        raw = source.encode()
        # pragma lines and line markers blanked (same offsets): pragmas are read from the text
        self.data = re.sub(rb"(?m)^[ \t]*#[ \t]*(pragma\b|line\b|\d).*$", lambda m: b" " * len(m.group()), raw)
        self.tree = _PARSER.parse(self.data)
        self.root = self.tree.root_node
        lines = source.split("\n")
        self.line_of: list[int] = []
        offset, current = 0, 1
        self.directives: list[_Directive] = []
        self.problems: list[tuple[int, str]] = []
        for row, line in enumerate(lines):
            offset += len(line.encode()) + 1
            m = _LINE_MARK.match(line)
            self.line_of.append(current)
            current = int(m.group(1)) if m else current + 1
            om = _OMP_LINE.match(line)
            if om:
                if line.rstrip().endswith("\\"):
                    self.problems.append((row, "a directive continued over lines"))
                self.directives.append(_parse_directive(om.group(1), row, offset - 1))
        if "_Pragma" in source:
            row = source[:source.index("_Pragma")].count("\n")
            self.problems.append((row, "a _Pragma operator (check the preprocessed kernel)"))
        self.stmt_at: dict[int, list[ts.Node]] = {}
        for n in _walk(self.root):
            if n.type in _STATEMENTS and n.parent is not None:
                self.stmt_at.setdefault(n.start_byte, []).append(n)
        self.on: dict[int, list[_Directive]] = {}  # statement node id -> directives on it, outermost first
        self.standalone: list[_Directive] = []
        for d in self.directives:
            if d.has("barrier", "taskwait", "flush", "taskyield", "threadprivate") or (
                    d.has("ordered") and ("depend" in d.clauses or "doacross" in d.clauses)) or d.has(
                    "cancel", "cancellation", "declare", "requires", "end", "begin", "error", "nothing"):
                self.standalone.append(d)
                continue
            target = self._target(d)
            if target is None:
                self.problems.append((d.row, "a directive whose statement could not be found"))
                continue
            self.on.setdefault(target.id, []).append(d)
        self.functions: dict[str, ts.Node] = {}
        for f in self.root.named_children:
            if f.type == "function_definition":
                name = self.func_name(f)
                if name:
                    self.functions[name] = f

    def _target(self, d: _Directive) -> ts.Node | None:
        at = d.end
        while at < len(self.data) and self.data[at:at + 1] in (b" ", b"\t", b"\n", b"\r"):
            at += 1
        if self.data[at:at + 2] in (b"//", b"/*"):
            return None
        nodes = self.stmt_at.get(at)
        if not nodes:
            return None
        return max(nodes, key=lambda n: n.end_byte - n.start_byte + (0 if n.type != "expression_statement" else 0))

    @staticmethod
    def func_name(f: ts.Node) -> str:
        d = _field(f, "declarator")
        while d is not None and d.type != "function_declarator":
            d = _field(d, "declarator")
        ident = _field(d, "declarator") if d is not None else None
        return _text(ident) if ident is not None and ident.type == "identifier" else ""

    def line(self, node_or_row: ts.Node | int) -> int:
        row = node_or_row if isinstance(node_or_row, int) else node_or_row.start_point[0]
        return self.line_of[row] if 0 <= row < len(self.line_of) else row + 1


class _Region:
    """One outermost construct: its accesses and what could not be proven."""

    def __init__(self, checker: _Checker, func: ts.Node, root_id: int) -> None:
        self.c = checker
        self.src = checker.src
        self.func = func
        self.uf = _UF()
        self.seg = self.uf.new()
        self.accs: list[_Acc] = []
        self.unknown: list[Finding] = []
        self.doubt = False
        self.serial = False
        self.loops: dict[int, _LoopCtx] = {}
        self.epochs: dict[int, int] = {}
        self.locks: set[str] = set()
        self.root_id = root_id
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
        reductions = d.names("reduction", "in_reduction")
        self.reduced |= reductions
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
        del reductions

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
        if d.has("simd") or len(chain) == 1 and False:
            pass
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
        if summary is None:
            self.unsure(node, fname, "a call to a function the checker does not know")
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
                if store and i == 0:
                    self.pointer_arg(a, ctx, write=True, definite=True)
                elif load or store:
                    self.pointer_arg(a, ctx, write=False, definite=True)
                else:
                    self.pointer_arg(a, ctx, write=False, definite=True)
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

    # --- judgement --------------------------------------------------------------------------------
    def judge(self) -> tuple[list[Finding], list[Finding]]:
        """(races, unknowns)."""
        races: list[Finding] = []
        unknown = list(self.unknown)
        by_name: dict[str, list[_Acc]] = {}
        for a in self.accs:
            by_name.setdefault(a.name, []).append(a)
        proven_by_deps = self.dependence_checks(by_name, unknown)
        for name, accs in sorted(by_name.items()):
            if not any(a.write for a in accs):
                continue
            found: set[tuple[int, str]] = set()
            for i, a in enumerate(accs):
                for b in accs[i:]:
                    if not (a.write or b.write):
                        continue
                    verdict = self.conflict(a, b, proven_by_deps)
                    if verdict is None:
                        continue
                    where = a if a.write else b
                    if verdict == "race":
                        if (where.line, "race") not in found:
                            found.add((where.line, "race"))
                            races.append(Finding(where.line, name, _why(a, b)))
                    elif (where.line, "unknown") not in found:
                        found.add((where.line, "unknown"))
                        unknown.append(Finding(where.line, name, "may be accessed by two threads at once (not proven disjoint or ordered)"))
        return races, unknown

    def dependence_checks(self, by_name: dict[str, list[_Acc]], unknown: list[Finding]) -> set[tuple[int, str]]:
        """(loop, object) pairs whose accesses inside the work-sharing loop the dependence analysis proves disjoint
        between iterations."""
        out: set[tuple[int, str]] = set()
        for lid, lc in self.loops.items():
            need: set[str] = set()
            for name, accs in by_name.items():
                inside = [a for a in accs if a.ctx.who == "loop" and a.ctx.cid == lid]
                if not inside or not any(a.write for a in accs):
                    continue
                if any(self.pair_needs_deps(a, b) for i, a in enumerate(inside) for b in inside[i:] if a.write or b.write):
                    need.add(name)
            if not need:
                continue
            proven, why = self.c.deps_parallel(lc, need)
            out |= {(lid, n) for n in proven}
            if why:
                unknown.append(Finding(self.src.line(lc.node), sorted(need - proven or need)[0], why))
        return out

    def pair_needs_deps(self, a: _Acc, b: _Acc) -> bool:
        if _common_sync(a, b) or self.same_thread(a, b):
            return False
        if a.loc.own and b.loc.own:
            return False
        if a.loc.tid and b.loc.tid and a.ctx.who != "task" and b.ctx.who != "task" and a.ctx.task is None and b.ctx.task is None:
            return False
        return True

    def same_thread(self, a: _Acc, b: _Acc) -> bool:
        if a.ctx.who == "master" and b.ctx.who == "master":
            return True
        if a.ctx.who == "one" and b.ctx.who == "one" and a.ctx.cid == b.ctx.cid and not a.ctx.multi:
            return True
        return a is b and not a.ctx.multi and a.ctx.who != "all"

    def concurrent(self, a: _Acc, b: _Acc) -> bool:
        if self.uf.find(a.seg) != self.uf.find(b.seg):
            return False
        for t, g in ((a, b), (b, a)):
            if t.ctx.task is not None and t.ctx.task[0] == g.ctx.thread and g.ctx.task is None:
                gen_thread, gen_epoch, gen_loops = t.ctx.task
                if g.epoch > gen_epoch:
                    return False
                if g.epoch < gen_epoch and not set(gen_loops) & set(g.ctx.seqloops):
                    return False
            if t.ctx.task is not None and g.ctx.task is not None and t.ctx.task[0] == g.ctx.task[0] and t.ctx.thread != g.ctx.thread:
                if t.ctx.task[1] < g.ctx.task[1] and not set(t.ctx.task[2]) & set(g.ctx.task[2]):
                    return False
        return True

    def conflict(self, a: _Acc, b: _Acc, deps_ok: set[tuple[int, str]]) -> str | None:
        """None: no race between the two; 'race': a certain one; 'unknown': not proven either way."""
        if not self.concurrent(a, b) or _common_sync(a, b) or self.same_thread(a, b):
            return None
        if a is b and not a.ctx.multi and a.ctx.who not in ("all",):
            return None
        la, lb = a.loc, b.loc
        if la.tid and lb.tid and a.ctx.who != "task" and b.ctx.who != "task" and a.ctx.task is None and b.ctx.task is None:
            return None
        if a.ctx.who == "loop" and b.ctx.who == "loop" and a.ctx.cid == b.ctx.cid:
            if (la.own and lb.own) or (a.ctx.cid, a.name) in deps_ok:
                return None
        if la.kind == "elem" and lb.kind == "elem" and la.const is not None and lb.const is not None and la.const != lb.const:
            return None
        same = (la.kind == "scalar" and lb.kind == "scalar") or (
            la.kind == lb.kind == "elem" and la.inv and lb.inv and la.key == lb.key and (not (la.sweep or lb.sweep) or a is b))
        multi = a.ctx.multi or b.ctx.multi or a.ctx.who == "all" or b.ctx.who == "all"
        certain = (same and multi and not self.doubt and not self.serial and not self.c.orphan
                   and not a.ctx.selective and not b.ctx.selective and a.definite and b.definite)
        return "race" if certain else "unknown"


def _why(a: _Acc, b: _Acc) -> str:
    if a.write and b.write:
        if "atomic" in a.ctx.sync or "atomic" in b.ctx.sync or any(s.startswith("critical") for s in a.ctx.sync | b.ctx.sync):
            return "written by several threads under different synchronization"
        return "written by several threads without synchronization"
    return "read without synchronization while other threads write it"


def _common_sync(a: _Acc, b: _Acc) -> bool:
    return bool(a.ctx.sync & b.ctx.sync)


def _squash(s: str) -> str:
    return re.sub(r"\s+", "", s)


def _target_name(n: ts.Node) -> str:
    t = _field(n, "left") if n.type == "assignment_expression" else (
        _field(n, "argument") if n.type == "update_expression" else None)
    t = _strip(t)
    return _text(t) if t is not None and t.type == "identifier" else ""


def _loop_var(loop: ts.Node) -> str:
    init = _field(loop, "initializer")
    if init is not None and init.type == "declaration":
        ds = init.children_by_field_name("declarator")
        return _text(_field(ds[0], "declarator")) if len(ds) == 1 and ds[0].type == "init_declarator" else ""
    if init is not None and init.type == "assignment_expression":
        left = _field(init, "left")
        return _text(left) if left is not None and left.type == "identifier" else ""
    return ""


def _const_bounds(loop: ts.Node) -> tuple[int | None, int | None, bool]:
    init, cond, upd = _field(loop, "initializer"), _field(loop, "condition"), _field(loop, "update")
    var = _loop_var(loop)
    value = None
    if init is not None and init.type == "declaration":
        ds = init.children_by_field_name("declarator")
        value = _field(ds[0], "value") if ds else None
    elif init is not None:
        value = _field(init, "right")

    def num(n: ts.Node | None) -> int | None:
        n = _strip(n)
        if n is None or n.type != "number_literal":
            return None
        try:
            return int(_text(n).rstrip("uUlL"), 0)
        except ValueError:
            return None
    if cond is None or cond.type != "binary_expression" or _text(_field(cond, "left")) != var or \
            _text(_field(cond, "operator")) not in ("<", "<=") or upd is None or \
            not (upd.type == "update_expression" and "++" in _text(upd)):
        return None, None, False
    return num(value), num(_field(cond, "right")), _text(_field(cond, "operator")) == "<="


def _chain(loop: ts.Node, k: int) -> list[ts.Node] | None:
    out = [loop]
    while len(out) < k:
        body = _field(out[-1], "body")
        while body is not None and body.type == "compound_statement":
            kids = [c for c in body.named_children if c.type != "comment"]
            if len(kids) != 1:
                return None
            body = kids[0]
        if body is None or body.type != "for_statement":
            return None
        out.append(body)
    return out


def _const_clause(d: _Directive, name: str) -> int | None:
    for arg in d.clauses.get(name, []):
        try:
            return int(arg.strip().rstrip("uUlL"), 0)
        except ValueError:
            return None
    return None


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


class _Checker:
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
                    out.setdefault(name, (derivs, d)) if False else out.__setitem__(name, (derivs, d))
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


def _in(n: ts.Node, outer: ts.Node | None) -> bool:
    return outer is not None and outer.start_byte <= n.start_byte < outer.end_byte


def _args(call: ts.Node) -> list[ts.Node]:
    args = _field(call, "arguments")
    return [a for a in args.named_children if a.type != "comment"] if args is not None else []


def _find(root: ts.Node, start: int, end: int, kind: str) -> ts.Node | None:
    for n in _walk(root):
        if n.start_byte == start and n.end_byte == end and n.type == kind:
            return n
    return None


def _root_ident(n: ts.Node | None) -> str:
    n = _strip(n)
    while n is not None and n.type in ("subscript_expression", "field_expression", "pointer_expression", "binary_expression"):
        n = _strip(_field(n, "argument") if n.type != "binary_expression" else _field(n, "left"))
    return _text(n) if n is not None and n.type == "identifier" else ""


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
            if words <= {"simd", "declare"} or (words <= {"simd", "for"} and False):
                continue
            out.append((n, f, "parallel" not in words))
    return out


def check(source: str) -> StaticVerdict:
    """The static race verdict of a kernel's source (see the module docstring)."""
    try:
        return _check(source)
    except RecursionError:
        return StaticVerdict("unknown", (Finding(0, "source", "nested too deep to analyse"),), 0)


def _check(source: str) -> StaticVerdict:
    c = _Checker(source)
    src = c.src
    unknown: list[Finding] = [Finding(src.line(r), "omp", why) for r, why in src.problems]
    races: list[Finding] = []
    if any(n.type == "ERROR" or n.is_missing for n in _walk(src.root)):
        first = next(n for n in _walk(src.root) if n.type == "ERROR" or n.is_missing)
        if src.directives:
            unknown.append(Finding(src.line(first), "source", "does not parse as C"))
    roots = _region_roots(src)
    for d in src.directives:
        if (set(d.words) & {"teams", "target", "distribute"}) and not any(src.on.get(n.id) and d in src.on[n.id] for n, _, _ in roots):
            unknown.append(Finding(src.line(d.row), (d.words or ("omp",))[0], "an OpenMP construct the checker does not model"))
    runtime = [n for n in _walk(src.root) if n.type == "call_expression" and _RUNTIME.match(_text(_field(n, "function")))]
    for n in runtime:
        unknown.append(Finding(src.line(n), _text(_field(n, "function")), "calls the threading runtime directly"))
    if not roots and not unknown and not any(set(d.words) - {"simd", "declare"} for d in src.directives):
        return StaticVerdict("none", (), 0)
    # functions called inside a construct that hold directives of their own (orphaned constructs)
    in_region: set[str] = set()
    for n, _f, _ in roots:
        in_region |= {_text(_field(x, "function")) for x in _walk(n) if x.type == "call_expression"}
    for n, f, orphan in roots:
        region = _Region(c, f, n.id)
        fname = src.func_name(f)
        if fname in c.called and sum(1 for d in c.decls(f).values()
                                     if d[1].type == "parameter_declaration" and d[0]) >= 2:
            unknown.append(Finding(src.line(n), fname or "function",
                                   "pointer parameters that may point into one array (the file calls the function)"))
        c.orphan = orphan
        region.written = _written(n)
        ctx = _Ctx(who="all", cid=n.id, multi=True, thread=n.id, private=frozenset(c.threadprivate))
        try:
            region.stmt(n, ctx)
        except RecursionError:
            region.unsure(n, "construct", "nested too deep to analyse")
        r, u = region.judge()
        if orphan or src.func_name(f) in in_region:
            u += [Finding(x.line, x.name, x.why) for x in r]
            r = []
            if src.func_name(f) in in_region:
                u.append(Finding(src.line(n), src.func_name(f) or "function", "an orphaned construct in a function a parallel region calls"))
        races += r
        unknown += u
    races = sorted(set(races), key=lambda x: (x.line, x.name))
    unknown = sorted(set(unknown), key=lambda x: (x.line, x.name))
    if races:
        return StaticVerdict("race", tuple(races), len(roots))
    if unknown:
        return StaticVerdict("unknown", tuple(unknown), len(roots))
    return StaticVerdict("proven", (), len(roots))


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
