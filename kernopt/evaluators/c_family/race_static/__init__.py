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
iteration's own elements or the polyhedral dependence analysis (kernopt.tuner.deps) proves the loop carries no
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

How the static and dynamic verdicts combine is the evaluator's (race.check; docs/verification.md, "Race check"):
a race found by either is a race; `proven` plus a clean sanitizer run is clean; `unknown` is decided by the
sanitizer unless the kernel may store where the sanitizer is blind (then `unproven`, rejected).

Findings carry only the checker's own fixed phrases, identifiers that match [A-Za-z_][A-Za-z0-9_]*, and line
numbers of the kernel source (from its `#line` markers): nothing else of the candidate's text.

Where the parts live (this module is the entry: `check`, `StaticVerdict`, `Finding`):
- directives.py: `#pragma omp` lines as directive words and clauses, the kernel's tree with each
  directive tied to its statement, the line map;
- facts.py: what holds outside any construct (library functions, declarations, pointers set once,
  summaries of the file's functions, the dependence analysis of a work-sharing loop);
- records.py: findings, accesses (element, context, phase), work-sharing loops;
- accesses.py: what each expression reads and writes, resolved to an object and an element;
- walk.py: the walk of a construct's statements and nested constructs (who runs what, privates,
  synchronization, phases);
- judge.py: pairs of accesses judged race, unknown or safe;
- syntax.py: shapes of C code in the tree-sitter tree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from kernopt.evaluators.c_family.race_static.facts import (
    _ATOMIC_BUILTIN,
    _LOCK_FN,
    _OMP_QUIET,
    _OUTPUT,
    _READ_ONLY,
    _RUNTIME,
    _Checker,
)
from kernopt.evaluators.c_family.race_static.judge import judge
from kernopt.evaluators.c_family.race_static.records import Finding, _Ctx
from kernopt.evaluators.c_family.race_static.syntax import _IDENT
from kernopt.evaluators.c_family.race_static.walk import _Region, _region_roots, _written
from kernopt.tuner.cloops import _field, _text, _walk

__all__ = ["Finding", "Kind", "StaticVerdict", "check"]  # Finding lives with the other records of the walk

Kind = Literal["proven", "race", "unknown", "none"]


@dataclass(frozen=True)
class StaticVerdict:
    verdict: Kind
    findings: tuple[Finding, ...]  # race: the racy places; unknown: what could not be proven
    regions: int  # how many parallel constructs were analysed

    def summary(self) -> str:
        """One line per finding (the checker's phrases, identifiers and line numbers only)."""
        head = f"static race check: {self.verdict} ({self.regions} construct(s))"
        return "\n".join([head, *(f"line {f.line}: `{f.name}` {f.why}" for f in self.findings[:20])])


def check(source: str) -> StaticVerdict:
    """The static race verdict of a kernel's source (see the module docstring)."""
    try:
        return _check(source)
    except RecursionError:
        return StaticVerdict("unknown", (Finding(0, "source", "nested too deep to analyse"),), 0)


# Library functions that store through a pointer where the sanitizer cannot see it: libm is not instrumented and
# ThreadSanitizer intercepts none of these (it does intercept memcpy, memset and the string functions).
_UNWATCHED_STORES = frozenset(f for f in _OUTPUT if f.startswith(("modf", "frexp", "sincos", "remquo", "lgamma")))


def blind_calls(source: str) -> tuple[str, ...]:
    """The calls anywhere in the file whose stores the sanitizer cannot see: libm's output-pointer functions,
    calls through anything but a function's name (a function pointer), and calls to a name the file does not
    define and the checker does not know (a libc function reached by address). The kernel's own functions are
    built with the sanitizer, so calls to them are watched. Returns the callees' names, validated
    identifiers ("pointer" for an expression)."""
    c = _Checker(source)
    out: dict[str, None] = {}
    for n in _walk(c.src.root):
        if n.type != "call_expression":
            continue
        callee = _field(n, "function")
        name = _text(callee) if callee is not None and callee.type == "identifier" else ""
        if not name:
            out["pointer"] = None
        elif name in _UNWATCHED_STORES or not (
                name in c.src.functions or name in c.pure or name in _READ_ONLY or name in _OUTPUT
                or name == "omp_get_thread_num" or name.startswith(("_mm", "__builtin_ia32"))
                or any(p.match(name) for p in (_ATOMIC_BUILTIN, _OMP_QUIET, _LOCK_FN, _RUNTIME))):
            out[name if _IDENT.fullmatch(name) else "pointer"] = None
    return tuple(out)


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
        r, u = judge(region)
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
