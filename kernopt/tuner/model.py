"""The polyhedral model of a C loop nest as read from its source: its loops, statements, iteration-domain
constraints and accesses (kernopt.tuner.deps turns them into isl sets and relations and answers the dependence
questions).

`_Builder` walks one outermost `for` nest of a function and reads, in isl's notation over loop variables (v_x) and
parameters (p_x):

- loops: counted loops over an integer with a constant step; their start and bound affine in the enclosing loop
  variables and parameters (`j < i`, `k <= j`, `i < n - 1`), a choice by one affine comparison (`i < (ii + 32 < n ?
  ii + 32 : n)`, min and max), a quotient or remainder by a positive constant (`n - (n - i) % 4`, `j < i / 2`);
  quotients and remainders of loop variables in `if` conditions and subscripts too (`if ((i + j) % 2 == 0)`,
  `x[i / 2]`), each an existentially quantified variable with its exact definition;
- statements: expression statements and initialized declarations, each with its enclosing loops, its place in the
  2d+1 schedule and the constraints of the affine `if` conditions around it (a condition outside the model is a
  statement of its reads, and both branches are taken as may-running: Stmt.must is False under them);
- accesses: arrays of arrays (`double A[n][m]`, parameters `double A[n][m]` or `double A[][M]`, VLA pointers
  `double (*A)[n]`), flat arrays (`a[i * n + j]`: polynomials, delinearized by deps where proven), row pointers
  declared in the nest (`double *row = &a[i * n]`), arrays declared in the nest (a fresh one per iteration of the
  loops around them) and scalars (a scalar declared in the nest is indexed by the loops around its declaration);
- parameters: integer names nothing in the nest writes; quotients and remainders of parameters by positive
  constants (`/k`, `%k`, defined exactly with C's truncation toward zero in every domain); integer locals of the
  function set once before the nest (`long nj = (9 * n + 7) / 8;`, `const int m2 = 2 * m;`: the parameter nj with
  its definition; `long nn = n * n;` stands for the product, a parameter of its own);
- names: macros that are integer constants, local pointers that view a parameter for good, struct members of a
  struct this file defines, pure functions of this file.

Outside it (`Unknown`, with the reason): pointers, dereferences and commas, calls but to pure functions, a
non-counted loop, `while`/`do`/`goto`/`break`/`continue`/`return`, a quotient or remainder by anything but a
positive constant, of unsigned values, or of loop variables in a flat subscript that needs delinearizing or in a
product (`x[(i % 2) * n]`), unsigned values in a condition, products of loop variables (`i * j`; but an exact
quotient like a packed triangle's `i * (i - 1) / 2` is a polynomial, which deps delinearizes as rows), arrays of
pointers and pointers assigned in the function (`src = dst`; but pointers that only take turns holding distinct
parameters are a Rotation, and a time loop that swaps them is analysed sweep by sweep: deps.sweeps), arrays
through pointers to pointers, data-dependent bounds and subscripts of written arrays (unless `approximate`: then any
value, see deps), and anything else the walk does not know.
"""

from __future__ import annotations

import itertools
import math
import re
import typing
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from fractions import Fraction

import tree_sitter as ts

from kernopt.tuner.cloops import _ancestors, _field, _text, _walk
from kernopt.tuner.cmacros import constants

PURE = frozenset({"sqrt", "fabs", "exp", "log", "sin", "cos", "tan", "pow", "fma", "fmin", "fmax", "abs", "labs",
                  "sqrtf", "fabsf", "expf", "logf", "sinf", "cosf", "tanf", "powf", "fmaf", "fminf", "fmaxf",
                  "exp2", "log2", "log10", "cbrt", "tanh", "atan", "atan2", "floor", "ceil", "round", "hypot"})
# Casts an index may go through unchanged: signed integer types of 32 bits or more (a narrower one wraps, `(uint8_t)`),
# and unsigned ones of a single name (`(size_t)i * n`: a loop variable or parameter, not a difference that may be < 0)
_WIDE = re.compile(r"(signed\s+)?(int|long|long\s+int|long\s+long(\s+int)?|int32_t|int64_t|ptrdiff_t|intptr_t|ssize_t)")
_UNSIGNED = re.compile(r"\b(unsigned|size_t|uint\w*_t|uintptr_t)\b")
_UNSIGNED_LITERAL = re.compile(r"\b(0[xX][0-9a-fA-F]+|\d+)[lL]*[uU]")
_INT_TYPES = re.compile(r"\b(char|short|int|long|unsigned|signed|size_t|ssize_t|ptrdiff_t|u?int\w*_t)\b")
_FLOAT_TYPES = re.compile(r"\b(float|double|_Complex)\b")
_CMP = {"<": "<", "<=": "<=", ">": ">", ">=": ">=", "==": "="}
_NOT = {"<": ">=", "<=": ">", ">": "<=", ">=": "<"}  # a comparison's negation

# monomial (sorted names) -> coefficient; () is the constant. A coefficient is a Fraction only in an exact quotient
# of a product of loop variables (`i * (i - 1) / 2`, Builder.exact_quotient): deps delinearizes those as packed rows
Poly = dict[tuple[str, ...], int]
# A loop that never runs more iterations than this a time (runs_at_most) is worth no loop move: an unroll-and-jam
# remainder by 4 runs at most 3, and a parallel for, a tiling or a wavefront over it splits nothing
FEW = 3


class Unknown(Exception):
    """The nest is outside the model: the message says why."""


@dataclass(frozen=True)
class Decl:
    """What a name denotes: derivations from the identifier outward ('*' pointer, '[]' array)."""

    name: str
    derivs: tuple[str, ...]
    restrict: bool  # the first pointer derivation is restrict-qualified
    scalar: str  # 'int' | 'float' | 'other' for a name without derivations
    where: str  # 'param' | 'local' | 'global' | 'field' (a member reached through a struct: `sys->lo`, `s.lo`)
    node: ts.Node | None = None
    unsigned: bool = False  # an unsigned integer type (arithmetic on it wraps)

    @property
    def contiguous(self) -> bool:
        """Subscripting walks one block of memory: at most one pointer, and only as the outermost level."""
        return "*" not in self.derivs[1:]

    @property
    def distinct(self) -> bool:
        """An object of its own (an array declared here, not a pointer that could point anywhere)."""
        return self.where not in ("param", "field") and bool(self.derivs) and self.derivs[0] == "[]"


@dataclass(frozen=True)
class LoopInfo:
    """One loop of a nest: its variable, direction and place in the nest."""

    index: int
    var: str
    step: int  # the constant step: > 0 counts up (`i += 4`: 4), < 0 counts down
    depth: int
    parent: int | None
    node: ts.Node = field(compare=False, repr=False)

    @property
    def line(self) -> int:
        return self.node.start_point[0]


@dataclass(frozen=True)
class Access:
    """One array or scalar reference of a statement: the object, whether written, and its subscripts
    (polynomials in loop variables and parameters; None where a subscript is outside the model)."""

    array: str
    write: bool
    dims: tuple[Poly, ...] | None
    text: str = ""
    whole: bool = False  # a subscript outside the model, taken as touching any element of the array (approximate)
    # quotients and remainders of loop variables in the subscripts (`x[i / 2]`): (isl name, its definition)
    defs: tuple[tuple[str, str], ...] = ()
    free: tuple[int, ...] = ()  # subscripts outside the model, each taken as any value (approximate); others exact
    may: bool = False  # a write that may not happen when its statement runs (`c ? (x[i] = 1) : 0`, `c && (x[i] = 1)`)


@dataclass
class Stmt:
    name: str
    loops: tuple[int, ...]  # enclosing loops of the nest, outermost first
    position: tuple[int, ...]  # the constants of the 2d+1 schedule (len(loops) + 1)
    constraints: list[str]  # extra affine constraints from `if` conditions, over loop and parameter names
    accesses: list[Access]
    node: ts.Node = field(repr=False)
    must: bool = True  # runs in every iteration its domain says (not in a branch of a condition outside the model)


def _ident(name: str) -> str:
    return f"v_{name}"


def _param(name: str) -> str:
    """A parameter's isl name; a product of parameters (`n*n`) is a parameter of its own (isl is affine), which
    forgets that it is n squared: the model then allows more than the program does, never less. A remainder
    (`(n - 2) % 4`) is the parameter `%k`, a quotient (`(9 * n + 7) / 8`) the parameter `/k`, each defined in every
    domain (_Builder.remainder)."""
    return f"p_{name.replace('*', '_X_').replace('%', '_R_').replace('/', '_Q_')}"


def _isl_poly(p: Poly, loop_vars: set[str]) -> str:
    """An affine polynomial as isl text (loop variables v_x, parameters p_x)."""
    terms = []
    for mono, c in sorted(p.items()):
        if not c:
            continue
        if not mono:
            terms.append(str(c))
            continue
        if len(mono) != 1 and any(m in loop_vars for m in mono):
            raise Unknown("a product of variables in an affine expression")
        name = _ident(mono[0]) if mono[0] in loop_vars else _param("*".join(mono))
        terms.append(f"{c}*{name}" if c != 1 else name)
    return " + ".join(terms) or "0"


def _add(a: Poly, b: Poly, sign: int = 1) -> Poly:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + sign * v
    return {k: v for k, v in out.items() if v}


def _mul(a: Poly, b: Poly) -> Poly:
    out: Poly = {}
    for (ka, va), (kb, vb) in itertools.product(a.items(), b.items()):
        k = tuple(sorted(ka + kb))
        out[k] = out.get(k, 0) + va * vb
    return {k: v for k, v in out.items() if v}


def _declarator(node: ts.Node | None) -> tuple[str, tuple[str, ...], bool]:
    """(name, derivations from the identifier outward, restrict on the first pointer)."""
    outer: list[tuple[str, bool]] = []
    while node is not None and node.type not in ("identifier", "field_identifier"):
        if node.type == "pointer_declarator":
            outer.append(("*", any(_text(q) in ("restrict", "__restrict", "__restrict__")
                                   for q in node.children if q.type == "type_qualifier")))
        elif node.type == "array_declarator":  # `double a[restrict n]` (a parameter) is a restrict pointer
            outer.append(("[]", any(_text(q) in ("restrict", "__restrict", "__restrict__")
                                    for q in node.children if q.type == "type_qualifier")))
        elif node.type not in ("parenthesized_declarator", "init_declarator"):
            return "", (), False
        node = _field(node, "declarator") or next((c for c in node.named_children if c.type.endswith("declarator")
                                                   or c.type == "identifier"), None)
    derivs = tuple(d for d, _ in reversed(outer))
    restrict = bool(outer) and outer[-1][1]  # the object's own level (the first derivation) is restrict
    return _text(node), derivs, restrict


def _unsigned_names(root: ts.Node, func: ts.Node) -> tuple[frozenset[str], frozenset[str]]:
    """(names, typedef names) of unsigned integer types: every declaration of a name among the globals and this
    function's parameters and locals (a block's own signed `n` does not hide the parameter's unsigned one), and
    the file's typedefs that resolve to an unsigned type (`typedef unsigned int int_u_t;`)."""
    typedefs: dict[str, str] = {}
    for d in _walk(root):
        if d.type == "type_definition":
            ty = _text(_field(d, "type"))
            for decl in d.children_by_field_name("declarator"):
                typedefs[_text(decl)] = ty
    utypes: set[str] = set()
    changed = True
    while changed:  # typedefs of typedefs
        changed = False
        for name, ty in typedefs.items():
            if name not in utypes and (_UNSIGNED.search(ty) or ty in utypes):
                utypes.add(name)
                changed = True
    names: set[str] = set()
    for d, _ in _in_scope_declarations(root, func):
        ty = _text(_field(d, "type"))
        if _UNSIGNED.search(ty) or ty in utypes:
            names.update(_declarator(x)[0] for x in d.children_by_field_name("declarator"))
    return frozenset(names), frozenset(utypes)


def _scalar_kind(ty: str) -> str:
    return "float" if _FLOAT_TYPES.search(ty) else "int" if _INT_TYPES.search(ty) else "other"


def _in_scope_declarations(root: ts.Node, func: ts.Node) -> Iterator[tuple[ts.Node, str]]:
    """The declarations of the file's globals and of the function's parameters and locals, in file order, each
    with where it is ('global', 'param', 'local'); a prototype's parameters are none of them."""
    for d in _walk(root):
        if d.type not in ("declaration", "parameter_declaration"):
            continue
        owner = next((a for a in _ancestors(d) if a.type == "function_definition"), None)
        if owner is not None and owner != func:
            continue
        where = "global" if owner is None else "param" if d.type == "parameter_declaration" else "local"
        if where == "global" and any(a.type == "function_declarator" for a in _ancestors(d)):
            continue  # a prototype's parameter
        yield d, where


def _declarations(root: ts.Node, func: ts.Node) -> dict[str, Decl]:
    """Globals, then the function's parameters and locals (a later declaration of a name wins; the
    nest's own locals are resolved separately)."""
    out: dict[str, Decl] = {}
    for d, where in _in_scope_declarations(root, func):
        ty = " ".join(_text(c) for c in d.children if c.type in ("primitive_type", "sized_type_specifier",
                                                                   "type_identifier", "type_qualifier"))
        for decl in d.children_by_field_name("declarator"):
            name, derivs, restrict = _declarator(decl)
            if name and not (derivs and derivs[0] == "()"):
                if decl.type == "function_declarator":
                    continue
                out[name] = Decl(name, derivs, restrict, _scalar_kind(ty), where, d, bool(_UNSIGNED.search(ty)))
    return out


def _pure_functions(root: ts.Node) -> frozenset[str]:
    """Functions of this file that compute a value from scalar arguments and nothing else
    (`static inline long clampl(long v, long lo, long hi) { return v < lo ? lo : (v > hi ? hi : v); }`):
    scalar parameters, no memory reached through pointers, arrays or struct members, every name their own or
    a pure function's (math, or another such function). A call to one reads its arguments only."""
    defs: dict[str, ts.Node] = {}
    for f in root.named_children:
        if f.type != "function_definition":
            continue
        decl = _field(f, "declarator")
        while decl is not None and decl.type != "function_declarator":
            decl = None if decl.type == "pointer_declarator" else _field(decl, "declarator")  # returns a pointer: no
        ident = _field(decl, "declarator") if decl is not None else None
        if ident is not None and ident.type == "identifier":
            defs[_text(ident)] = f
    pure = set(PURE)
    changed = True
    while changed:
        changed = False
        for fname, f in defs.items():
            if fname not in pure and _is_pure(f, pure):
                pure.add(fname)
                changed = True
    return frozenset(pure - PURE)


def _is_pure(f: ts.Node, pure: set[str]) -> bool:
    own: set[str] = set()
    for d in _walk(f):
        if d.type in ("parameter_declaration", "declaration"):
            if d.type == "declaration" and any(c.type == "storage_class_specifier" for c in d.children):
                return False  # a static (state kept between calls) or extern local
            for x in d.children_by_field_name("declarator"):
                name, derivs, _ = _declarator(x)
                if derivs or not name:
                    return False
                own.add(name)
    body = _field(f, "body")
    for n in _walk(body):
        if n.type in ("subscript_expression", "pointer_expression", "field_expression", "asm_statement", "gnu_asm_expression"):
            return False
        if n.type == "call_expression":
            if _text(_field(n, "function")) not in pure:
                return False
        elif n.type == "identifier" and _text(n) not in own and not (n.parent is not None and n.parent.type == "call_expression"):
            return False
    return True


def _changed(func: ts.Node) -> set[str]:
    """Names the function's body assigns, increments or takes the address of (`&p`: anything may change it)."""
    out = set()
    for n in _walk(_field(func, "body")):
        t = _field(n, "left") if n.type == "assignment_expression" else (
            _field(n, "argument") if n.type == "update_expression" or (
                n.type == "pointer_expression" and _text(_field(n, "operator")) == "&") else None)
        if t is not None:
            out.add(_text(t))
    return out


def _declaration_counts(func: ts.Node) -> dict[str, int]:
    """How many times the function declares each name (its parameters and locals)."""
    count: dict[str, int] = {}
    for n in _walk(func):
        if n.type in ("declaration", "parameter_declaration"):
            for x in n.children_by_field_name("declarator"):
                count[_declarator(x)[0]] = count.get(_declarator(x)[0], 0) + 1
    return count


def _once(func: ts.Node, top: ts.Node, decls: dict[str, Decl]) -> dict[str, Decl]:
    """Locals of the function declared once (no other declaration or parameter of the name), before the nest and in a
    block around it, so every use of the name in the nest is that declaration, and never changed."""
    count = _declaration_counts(func)
    changed = _changed(func)
    out: dict[str, Decl] = {}
    for name, d in decls.items():
        block = d.node.parent if d.node is not None else None
        if d.where == "local" and count.get(name) == 1 and name not in changed and block is not None \
                and d.node is not None and d.node.end_byte <= top.start_byte and top.end_byte <= block.end_byte:
            out[name] = d
    return out


def _uncast(v: ts.Node | None) -> ts.Node | None:
    """An initializer under its casts and parentheses (`(double (*)[m])(bp)` -> `bp`); None for a parenthesized list."""
    while v is not None and v.type in ("cast_expression", "parenthesized_expression"):
        v = _field(v, "value") if v.type == "cast_expression" else (v.named_children[0] if v.named_child_count == 1 else None)
    return v


def _views(func: ts.Node, top: ts.Node, decls: dict[str, Decl]) -> dict[str, str]:
    """Local pointers of the function that view a parameter's memory for good: initialized from it (through
    casts, at an offset: `double (*B)[m] = (double (*)[m])bp;`) and never changed again (`_once`). name -> the
    parameter. Aliasing questions about a view are the parameter's (a view of a restrict pointer is based on it)."""
    out: dict[str, str] = {}
    for name, d in _once(func, top, decls).items():
        if not d.derivs or d.derivs[0] != "*" or d.node is None:
            continue
        for x in d.node.children_by_field_name("declarator"):
            if x.type != "init_declarator" or _declarator(x)[0] != name:
                continue
            v = _uncast(_field(x, "value"))
            if v is not None and v.type == "binary_expression" and _text(_field(v, "operator")) in ("+", "-"):
                v = _field(v, "left")
            origin = decls.get(_text(v)) if v is not None and v.type == "identifier" else None
            if origin is not None and origin.where == "param" and origin.derivs:
                out[name] = origin.name
    return out


@dataclass(frozen=True)
class Rotation:
    """Local pointers that take turns holding distinct parameters (`double *src = u, *dst = tmp;` and, in a time
    loop, `double *sw = src; src = dst; dst = sw;`): at every point outside their swaps each member holds one of
    `params`, no two members the same one."""

    members: frozenset[str]
    params: frozenset[str]


def _rotations(func: ts.Node, top: ts.Node, decls: dict[str, Decl], count: dict[str, int],
               changed: set[str]) -> dict[str, Rotation]:
    """The function's rotations (name -> its Rotation), where proven: each member a local pointer declared once and
    initialized from a pointer parameter (through casts) that nothing changes, the members' parameters pairwise
    different, and every other mention of a member a subscript (`src[p]`) or part of a swap. A swap is a run of
    consecutive statements of one block, outside the nest, that declares temporaries from members (`double *sw =
    src;`, used nowhere else) and assigns members from members or temporaries (`src = dst;`) so that they end holding
    a permutation of what they held. Anything else (a member passed to a call, `src + 1`, a swap that loses a value,
    a `goto` that could enter a swap halfway) and the member's group is no rotation. `count` and `changed` are the
    function's _declaration_counts and _changed."""
    body = _field(func, "body")
    if body is None or any(n.type in ("goto_statement", "labeled_statement") for n in _walk(body)):
        return {}
    # a name nothing declares may be a macro (`STEP;`, `F()`, `CAT(d, st) = ...`) that assigns a member unseen
    root = func
    while root.parent is not None:
        root = root.parent
    known = declared_names(func) | PURE | {_declarator(x)[0] for n in _walk(root) if n.type in (
        "declaration", "function_definition") and all(a.id != func.id for a in _ancestors(n)) for x in n.children_by_field_name(
        "declarator")} | {_text(_field(n, "name")) for n in _walk(root) if n.type == "preproc_def"
                          and re.fullmatch(r"\(?\s*[-+]?[\d.]+[uUlLfF]*\s*\)?\s*", _text(_field(n, "value")) or "")}
    if any(x.type == "identifier" and _text(x) not in known for x in _walk(body)):
        return {}
    start: dict[str, str] = {}  # candidate member -> the parameter it is initialized from
    for name, d in decls.items():
        if d.where != "local" or d.derivs[:1] != ("*",) or count.get(name) != 1 or d.node is None:
            continue
        for x in d.node.children_by_field_name("declarator"):
            v = _uncast(_field(x, "value")) if x.type == "init_declarator" and _declarator(x)[0] == name else None
            origin = decls.get(_text(v)) if v is not None and v.type == "identifier" else None
            if origin is not None and origin.where == "param" and origin.derivs and origin.name not in changed:
                start[name] = origin.name

    def swap_step(s: ts.Node) -> tuple[str, str] | None:
        """(target, source) of `x = y;` or `T *x = y;` (one declarator), else None."""
        if s.type == "expression_statement" and s.named_child_count == 1:
            e = s.named_children[0]
            if e.type == "assignment_expression" and _text(_field(e, "operator")) == "=":
                left, right = _field(e, "left"), _uncast(_field(e, "right"))
                if left is not None and left.type == "identifier" and right is not None and right.type == "identifier":
                    return _text(left), _text(right)
        if s.type == "declaration" and len(s.children_by_field_name("declarator")) == 1:
            x = s.children_by_field_name("declarator")[0]
            v = _uncast(_field(x, "value")) if x.type == "init_declarator" else None
            if v is not None and v.type == "identifier" and _declarator(x)[1][:1] == ("*",):
                return _declarator(x)[0], _text(v)
        return None

    # the runs of swap steps that mention a candidate, each checked by running it on symbols
    bad: set[str] = set()
    swaps: list[tuple[ts.Node, set[str]]] = []  # (a statement of a swap, the members it mentions)
    temps: set[str] = set()  # the temporaries of the swaps
    links: list[set[str]] = []
    for block in (n for n in _walk(body) if n.type == "compound_statement"):
        run: list[tuple[ts.Node, tuple[str, str]]] = []
        for s in [*block.named_children, None]:
            step = swap_step(s) if s is not None else None
            if s is not None and step is not None and (step[0] in start or step[1] in start or step[1] in {t for _, (t, _) in run}):
                run.append((s, step))
                continue
            if run:
                value: dict[str, str | None] = {}
                members, local = set(), set()
                escapes = False  # a name neither member nor temporary assigned from one: a copy that escapes
                for st, (target, source) in run:
                    if st.type == "declaration":
                        local.add(target)
                    elif target in start:
                        members.add(target)
                    else:
                        escapes = True
                    if source in start:
                        members.add(source)
                    value[target] = value.get(source, source) if (source in start or source in local) else None
                final = [value.get(m, m) for m in members]
                inside = top.start_byte <= block.start_byte < top.end_byte
                if escapes or inside or sorted(f for f in final if f is not None) != sorted(members) \
                        or any(count.get(t) != 1 for t in local):
                    bad |= members
                else:
                    links.append(members)
                    swaps += [(st, members) for st, _ in run]
                    temps |= local
                run = []
    in_swap = {st.id for st, _ in swaps}
    for x in _walk(body):  # every other mention of a member is a subscript; a temporary's are in its swap
        if x.type != "identifier":
            continue
        name, up = _text(x), x.parent
        if name in start:
            if up is not None and up.type == "subscript_expression" and _field(up, "argument") == x:
                continue
            if any(a.id in in_swap for a in _ancestors(x)) or (up is not None and up.type.endswith("declarator")
                                                               and _field(up, "declarator") == x):
                continue  # in a swap, or its own declaration (the only one: declared once); not another's value
            bad.add(name)
        elif name in temps and not any(a.id in in_swap for a in _ancestors(x)):
            bad |= {m for st, ms in swaps if any(_declarator(d)[0] == name for d in st.children_by_field_name(
                "declarator")) for m in ms}
    # groups: members linked by a swap, all good, their parameters pairwise different
    groups: list[set[str]] = []
    for link in links:
        joined = [g for g in groups if g & link]
        merged = set(link).union(*joined)
        groups = [g for g in groups if not g & link] + [merged]
    out: dict[str, Rotation] = {}
    for g in groups:
        params = [start[m] for m in g]
        if len(g) < 2 or g & bad or len(set(params)) != len(params):
            continue
        rot = Rotation(frozenset(g), frozenset(params))
        out.update({m: rot for m in g})
    return out


_ALLOCATORS = frozenset({"malloc", "calloc", "aligned_alloc"})


def _fresh(func: ts.Node, top: ts.Node, decls: dict[str, Decl]) -> frozenset[str]:
    """Local pointers of the function that hold a block of their own for good: initialized by an allocator (through
    casts: `double *tmp = (double *)malloc(n * sizeof *tmp);`) and never changed again (`_once`): an object distinct
    from every other one, as a local array is."""
    out = set()
    shadowed = declared_names(func)
    for name, d in _once(func, top, decls).items():
        if d.derivs != ("*",) or d.node is None:
            continue
        for x in d.node.children_by_field_name("declarator"):
            if x.type != "init_declarator" or _declarator(x)[0] != name:
                continue
            v = _uncast(_field(x, "value"))
            callee = _text(_field(v, "function")) if v is not None and v.type == "call_expression" else ""
            if callee in _ALLOCATORS and callee not in shadowed and _only_subscripted(func, top, name, x):
                out.add(name)
    return frozenset(out)


def _only_subscripted(func: ts.Node, top: ts.Node, name: str, declarator: ts.Node) -> bool:
    """Every mention of `name` in the function but its declaration subscripts it (`tmp[k]`), frees it, measures it
    (`sizeof *tmp`) or starts a row pointer declared in the nest (`double *r = tmp + i * n;`): no other pointer holds
    the block (a copy into a global, a local pointer before the nest, an argument of a call could alias it)."""
    for x in _walk(_field(func, "body")):
        if x.type != "identifier" or _text(x) != name or declarator.start_byte <= x.start_byte < declarator.end_byte:
            continue
        up = x.parent
        if up is None:
            return False
        if up.type == "subscript_expression" and _field(up, "argument") == x:
            continue
        if up.type == "argument_list" and up.parent is not None and _text(up.parent) == f"free({name})":
            continue
        if up.type == "pointer_expression" and up.parent is not None and up.parent.type == "sizeof_expression":
            continue
        if up.type == "binary_expression" and up.parent is not None and up.parent.type == "init_declarator" and \
                top.start_byte <= x.start_byte < top.end_byte:
            continue
        if up.type == "init_declarator" and top.start_byte <= x.start_byte < top.end_byte:
            continue
        return False
    return True


def _fixed_locals(func: ts.Node, top: ts.Node, decls: dict[str, Decl]) -> dict[str, ts.Node]:
    """Integer locals of the function declared before the nest with an initializer, never changed (`_once`), whose
    initializer reads only names nothing changes either (`long nn = n * n;`): in an index or bound they stand for
    that expression. name -> the initializer."""
    changed = _changed(func)
    out: dict[str, ts.Node] = {}
    for name, d in _once(func, top, decls).items():
        if d.derivs or d.scalar != "int" or d.node is None or not _wide(_text(_field(d.node, "type"))):
            continue
        for x in d.node.children_by_field_name("declarator"):
            v = _field(x, "value") if x.type == "init_declarator" and _declarator(x)[0] == name else None
            if v is not None and v.type != "initializer_list" and not _names_in(v) & changed:
                out[name] = v
    return out


def declared_names(func: ts.Node) -> set[str]:
    """The names a function definition declares: its parameters and locals, and a nested function's name (not its
    own)."""
    own = _field(func, "declarator")
    while own is not None and own.type != "function_declarator":
        own = _field(own, "declarator")
    return {_text(x) for x in _walk(func) if x.type == "identifier" and x.parent is not None and (
        x.parent.type in ("declaration", "parameter_declaration") or x.parent.type.endswith("declarator"))
        and not (own is not None and x.parent.id == own.id)}


def _plain_type(ty: str) -> str:
    """A type's text without `const`, its words one space apart."""
    return " ".join(ty.replace("const", "").split())


def _wide(ty: str) -> bool:
    """An integer type that holds an index without wrapping: signed, 32 bits or more, or size_t-like."""
    ty = _plain_type(ty)
    return bool(_WIDE.fullmatch(ty)) or ty in ("size_t", "unsigned long", "unsigned long long", "uint64_t", "uintptr_t")


def _unparen(node: ts.Node | None) -> ts.Node | None:
    """The expression inside any parentheses around it."""
    while node is not None and node.type == "parenthesized_expression" and node.named_child_count == 1:
        node = node.named_children[0]
    return node


def _names_in(node: ts.Node) -> set[str]:
    return {_text(n) for n in _walk(node) if n.type == "identifier"}


def _siblings(a: ts.Node, b: ts.Node) -> bool:
    """Two declarations whose scopes (the blocks or loops holding them) do not contain one another."""
    sa, sb = a.parent, b.parent
    return sa is not None and sb is not None and sa.id != sb.id and \
        sa.id not in {x.id for x in _ancestors(sb)} and sb.id not in {x.id for x in _ancestors(sa)}


def _member(root: ts.Node, owner: Decl, access: ts.Node) -> Decl | None:
    """The member a field expression `P->f` / `P.f` names, as a Decl of its own (named by the expression's text,
    where 'field'), from the struct definition in this file that P's type names (`struct tag`, or a typedef of
    one); None where that is not known (P through two pointers, a struct from a header, a nested member)."""
    arg, member, op = _field(access, "argument"), _field(access, "field"), _text(_field(access, "operator"))
    if arg is None or arg.type != "identifier" or member is None or owner.node is None:
        return None
    if owner.derivs != (("*",) if op == "->" else ()):  # `->` through one pointer, `.` on the struct itself
        if not (op == "->" and owner.derivs == ("[]",)):
            return None
    body = _struct_body(root, _field(owner.node, "type"))
    if body is None:
        return None
    for fd in body.named_children:
        if fd.type != "field_declaration":
            continue
        ty = " ".join(_text(c) for c in fd.children if c.type in ("primitive_type", "sized_type_specifier", "type_identifier"))
        for decl in fd.children_by_field_name("declarator"):
            name, derivs, restrict = _declarator(decl)
            if name == _text(member):
                return Decl(f"{_text(arg)}{op}{name}", derivs, restrict, _scalar_kind(ty), "field", fd)
    return None


def _struct_body(root: ts.Node, ty: ts.Node | None) -> ts.Node | None:
    """The field list of the struct a type names: `struct tag` (its definition anywhere in the file) or a
    typedef name whose type is a struct with a body (or `struct tag`)."""
    if ty is not None and ty.type == "type_identifier":
        for d in _walk(root):
            if d.type == "type_definition" and any(_text(x) == _text(ty) for x in d.children_by_field_name("declarator")):
                return _struct_body(root, _field(d, "type"))
        return None
    if ty is None or ty.type != "struct_specifier":
        return None
    if _field(ty, "body") is not None:
        return _field(ty, "body")
    tag = _text(_field(ty, "name"))
    for d in _walk(root):
        if d.type == "struct_specifier" and _text(_field(d, "name")) == tag and _field(d, "body") is not None:
            return _field(d, "body")
    return None


class _Builder:
    """Walks one nest and builds its statements; raises Unknown when something is outside the model."""

    def __init__(self, data: bytes, root: ts.Node, func: ts.Node, top: ts.Node, approximate: bool = False) -> None:
        # approximate: over-approximate instead of giving up where that stays sound (a subscript outside the model as
        # any element of its array, a data-dependent loop bound as no bound: the loop's statements may run)
        self.approximate = approximate
        self.inexact: set[int] = set()  # loops whose bounds were dropped (approximate)
        self.updated: set[str] = set()  # names of arrays the nest assigns through a subscript
        text = data.decode(errors="replace")
        self.macros = constants(text, len(data[:top.start_byte].decode(errors="replace")))  # characters, not bytes
        self.decls = _declarations(root, func)
        self.unsigned_names, self.unsigned_types = _unsigned_names(root, func)
        self.root = root
        self.pure = _pure_functions(root)
        # names the function declares (a parameter `double (*g)(double)`, a local): a call to one is not the file's g
        self.shadowing = declared_names(func)
        self.origins = _views(func, top, self.decls)
        self.fresh = _fresh(func, top, self.decls)
        self.changed = _changed(func)
        self.declared = _declaration_counts(func)
        self.rotations = _rotations(func, top, self.decls, self.declared, self.changed)
        self.fixed = _fixed_locals(func, top, self.decls)
        self.top = top
        self.loops: list[LoopInfo] = []
        self.bounds: dict[int, list[str]] = {}
        self.stmts: list[Stmt] = []
        self.locals: dict[str, tuple[ts.Node, tuple[int, ...], str]] = {}  # scalars declared in the nest
        # row pointers declared in the nest: (array, offset, declaration); the offset's value where it is declared
        self.rows: dict[str, tuple[str, ts.Node | None, ts.Node]] = {}
        self.row_offsets: dict[str, Poly | None] = {}
        self.arrays: dict[str, tuple[ts.Node, tuple[int, ...]]] = {}  # arrays declared in the nest, the loops around
        self.written: set[str] = set()
        self.params: set[str] = set()
        self.remainders: dict[tuple[str, int, str], str] = {}  # (dividend in isl, divisor, op) -> its parameter `%k`
        self.definitions: list[str] = []  # each remainder or quotient parameter's value, a constraint every domain gets
        # each quotient parameter's C text where it names only what is in scope before the nest (codegen prints it)
        self.param_texts: dict[str, str] = {}
        self.local_remainders: set[str] = set()  # remainders of loop variables, each quantified in its loop's bounds
        self.bound: list[tuple[str, str]] | None = None  # while reading a loop's bounds: its remainders, defined
        self.defined: set[str] = set()  # locals set once before the nest taken as parameters (fixed_local)
        self.maybe = 0  # > 0 while in a branch of a condition outside the model (its statements may not run)
        headers = {x.id for n in _walk(top) if n.type == "for_statement"
                   for x in (_field(n, "initializer"), _field(n, "update")) if x is not None}
        self.loop_names = {v for n in _walk(top) if n.type == "for_statement" for v in [_loop_name(n)] if v}
        for n in _walk(top):  # names written anywhere in the nest but in loop headers: never parameters
            if n.type in ("declaration", "assignment_expression", "update_expression") and n.id in headers:
                continue
            t = _field(n, "left") if n.type == "assignment_expression" else (
                _field(n, "argument") if n.type == "update_expression" else None)
            if t is not None and t.type == "identifier":
                self.written.add(_text(t))
            while t is not None and t.type == "subscript_expression":
                t = _field(t, "argument")
                if t is not None and t.type == "identifier":
                    self.updated.add(_text(t))
            if n.type == "declaration":
                if any(c.type == "storage_class_specifier" for c in n.children):
                    raise Unknown(f"line {n.start_point[0] + 1}: a static or extern declaration inside the nest")
                for d in n.children_by_field_name("declarator"):
                    name, derivs, _ = _declarator(d)
                    if derivs and all(x == "[]" for x in derivs) and d.type == "array_declarator":
                        if name in self.arrays:  # a local array without initializer: a fresh one per iteration
                            raise Unknown(f"`{name}` declared twice inside the nest")
                        self.arrays[name] = (n, ())
                        continue
                    if derivs:
                        row = self._row_pointer(d, derivs)
                        if row is None:
                            raise Unknown(f"an array or pointer `{name}` declared inside the nest")
                        if name in self.rows:
                            raise Unknown(f"`{name}` declared twice inside the nest")
                        self.rows[name] = (*row, n)
                        continue
                    if name in self.locals and not _siblings(self.locals[name][0], n):
                        raise Unknown(f"`{name}` declared twice inside the nest, one scope inside the other")
                    # the same name in sibling blocks (`long p = ...` in two loops) is two objects: the walk meets
                    # each declaration before the uses in its block, and _statement points the name at it then
                    self.locals[name] = (n, (), _scalar_kind(_text(_field(n, "type"))))
        if self.written & (set(self.rows) | set(self.arrays)):
            raise Unknown(f"`{sorted(self.written & (set(self.rows) | set(self.arrays)))[0]}` is assigned inside the nest")
        self._loop(top, (), [0])

    # --- expressions -------------------------------------------------------------------------------
    def poly(self, node: ts.Node | None, loop_vars: set[str]) -> Poly:
        """An integer expression as a polynomial in loop variables and parameters, or Unknown."""
        if node is None:
            raise Unknown("a missing expression")
        t = node.type
        if t == "number_literal":
            text = _text(node).rstrip("uUlL")
            try:
                v = int(text, 0)
            except ValueError:
                raise Unknown(f"a non-integer constant `{_text(node)}` in an index") from None
            return {(): v} if v else {}
        if t == "identifier":
            name = _text(node)
            if name in loop_vars:
                return {(name,): 1}
            self._in_scope(name, node)
            if name in self.macros:
                return {(): self.macros[name]} if self.macros[name] else {}
            decl = self.decls.get(name)
            if name in self.locals and name not in self.written:
                return self.poly(self._constant_init(name), loop_vars)
            if name in self.fixed and name not in self.locals:  # `long nj = (9 * n + 7) / 8;` before the nest
                return self.fixed_local(name)
            if name in self.loop_names:
                raise Unknown(f"the loop variable `{name}` is used outside its loop")
            if name in self.written or name in self.locals or (decl is not None and (decl.derivs or decl.scalar != "int")):
                raise Unknown(f"`{name}` in an index or bound is not a loop variable or an integer parameter")
            self.params.add(name)
            return {(name,): 1}
        if t == "parenthesized_expression" and node.named_child_count == 1:
            return self.poly(node.named_children[0], loop_vars)
        if t == "cast_expression":
            ty = _plain_type(_text(_field(node, "type")))
            value = _field(node, "value")
            if _WIDE.fullmatch(ty) or (_UNSIGNED.search(ty) and value is not None and value.type == "identifier"):
                return self.poly(value, loop_vars)
            raise Unknown(f"`{_text(node)}`: a cast that may change the value")
        if t == "unary_expression" and _text(_field(node, "operator")) in ("-", "+"):
            p = self.poly(_field(node, "argument"), loop_vars)
            return p if _text(_field(node, "operator")) == "+" else {k: -v for k, v in p.items()}
        if t == "binary_expression" and _text(_field(node, "operator")) in ("+", "-", "*"):
            a, b = self.poly(_field(node, "left"), loop_vars), self.poly(_field(node, "right"), loop_vars)
            op = _text(_field(node, "operator"))
            return _mul(a, b) if op == "*" else _add(a, b, 1 if op == "+" else -1)
        if t == "binary_expression" and _text(_field(node, "operator")) in ("%", "/"):
            exact = self.exact_quotient(node, loop_vars) if _text(_field(node, "operator")) == "/" else None
            return exact if exact is not None else {(self.remainder(node, loop_vars),): 1}
        raise Unknown(f"`{_text(node)}` is not an affine expression")

    def exact_quotient(self, node: ts.Node, loop_vars: set[str]) -> Poly | None:
        """`P / c` for a polynomial P with a product of loop variables (a packed triangle's `i * (i - 1) / 2`) that c,
        a positive constant, divides for every integer value of its variables (P's value mod c depends only on theirs
        mod c: each combination is tried): the polynomial P/c, rational coefficients and integer values, which
        truncation does not change. None where P is affine in the loop variables (`remainder` takes those); Unknown
        where c may not divide P, or for unsigned arithmetic."""
        left, right = _field(node, "left"), _field(node, "right")
        a = self.poly(left, loop_vars)
        if not any(sum(v in loop_vars for v in m) > 1 for m in a):
            return None
        divisor = self.poly(right, set())
        c = divisor.get((), 0)
        names = sorted({v for m in a for v in m})
        if set(divisor) - {()} or c <= 0 or self.unsigned(node) or c ** len(names) > 4096 \
                or any(not isinstance(v, int) for v in a.values()):
            raise Unknown(f"`{_text(node)}` is not affine")
        for values in itertools.product(range(c), repeat=len(names)):
            at = dict(zip(names, values, strict=True))
            if sum(v * math.prod(at[x] for x in m) for m, v in a.items()) % c:
                raise Unknown(f"`{_text(node)}`: {c} may not divide `{_text(left)}`")
        # Poly's coefficients are Fractions here, as its comment says (deps reads them as such)
        return typing.cast(Poly, {m: Fraction(v, c) for m, v in a.items()})

    def fixed_local(self, name: str) -> Poly:
        """An integer local set once before the nest from parameters: a parameter of its own whose definition (its
        initializer, affine in parameters and their quotients and remainders) every domain gets (`long nj = (9 * n +
        7) / 8;`, `const long m2 = 2 * m;`), so `a[i * nj + j]` has the stride nj; an alias of one parameter is that
        parameter; an initializer that is a product (`long nn = n * n;`) stands for itself (its monomials)."""
        if name in self.defined:
            return {(name,): 1}
        p = self.poly(self.fixed[name], set())
        if (len(p) == 1 and next(iter(p.values())) == 1) or any(len(m) > 1 for m in p):
            return p
        self.defined.add(name)
        self.params.add(name)
        self.definitions.append(f"{_param(name)} = {_isl_poly(p, set())}")
        return {(name,): 1}

    def unsigned(self, node: ts.Node, depth: int = 0) -> bool:
        """Whether unsigned arithmetic may enter the expression, where it wraps and changes `%` and comparisons: an
        unsigned type, typedef, literal (`2u`) or name (any declaration of it), also through the initializer of an
        integer local it names (`long t = n - 2u;` then `t % 4`)."""
        text = _text(node)
        if _UNSIGNED.search(text) or _UNSIGNED_LITERAL.search(text) or depth > 20:
            return True
        for x in _walk(node):
            if x.type == "type_identifier" and _text(x) in self.unsigned_types:
                return True
            if x.type == "identifier":
                name = _text(x)
                if name in self.unsigned_names:
                    return True
                inits: list[ts.Node | None] = [self.fixed[name]] if name in self.fixed else []
                if name in self.locals:
                    inits += [_field(d, "value") for d in self.locals[name][0].children_by_field_name("declarator")
                              if d.type == "init_declarator" and _text(_field(d, "declarator")) == name]
                if any(v is not None and self.unsigned(v, depth + 1) for v in inits):
                    return True
        return False

    def remainder(self, node: ts.Node, loop_vars: set[str]) -> str:
        """`A % c` or `A / c` (c a positive constant) as a name `%k` or `/k` whose value the domains define exactly:
        C's remainder takes A's sign, so A mod c where A >= 0 and -((-A) mod c) where A < 0; C's quotient truncates
        toward zero, so floor(A / c) where A >= 0 and -floor(-A / c) where A < 0 (`long nj = (9 * n + 7) / 8;`,
        `n / 2` in a bound). A of parameters only (an unroll-and-jam
        remainder loop's start `n - 1 - (n - 2) % 4`) is a parameter every domain defines; A of loop variables
        too (`n - (n - i) % 4`, the remainder of a band inside an i loop) only in a loop's bounds, where the loop
        quantifies it (`exists`, _loop). Unknown for anything else (a variable divisor, unsigned arithmetic,
        which wraps, a loop variable's remainder in a subscript or condition)."""
        left, right = _field(node, "left"), _field(node, "right")
        op = _text(_field(node, "operator"))
        what = "a remainder" if op == "%" else "a quotient"
        if self.unsigned(node):
            raise Unknown(f"`{_text(node)}`: {what} of unsigned values")
        divisor = self.poly(right, set())
        if set(divisor) - {()} or divisor.get((), 0) <= 0:
            raise Unknown(f"`{_text(node)}`: {what} by something other than a positive constant")
        a = self.poly(left, loop_vars)
        local = any(v in loop_vars for m in a for v in m)
        if local and self.bound is None:
            raise Unknown(f"`{_text(node)}`: {what} of a loop variable outside a loop's bounds")
        if any(len(m) > 1 and any(v in loop_vars or v in self.local_remainders for v in m) for m in a):
            raise Unknown(f"`{_text(node)}` is not affine")
        self.params.update("*".join(m) for m in a if len(m) > 1)
        dividend, c = _isl_poly(a, loop_vars), divisor[()]
        key = (dividend, c, op)
        if not local and key in self.remainders:
            return self.remainders[key]
        name = f"{op}{len(self.remainders) + len(self.local_remainders)}"
        r = _param(name)
        if op == "%":
            definition = (f"(({dividend}) >= 0 and {r} = ({dividend}) mod {c} or "
                          f"({dividend}) < 0 and {r} = -((-({dividend})) mod {c}))")
        else:
            definition = (f"(({dividend}) >= 0 and {r} = floor(({dividend})/{c}) or "
                          f"({dividend}) < 0 and {r} = -floor((-({dividend}))/{c}))")
        if local:
            assert self.bound is not None
            self.local_remainders.add(name)
            self.bound.append((r, definition))
        else:
            self.remainders[key] = name
            self.params.add(name)
            self.definitions.append(definition)
            names = {_text(x) for x in _walk(node) if x.type == "identifier"}
            if op == "/" and not names & (set(self.locals) | self.loop_names | set(self.arrays) | set(self.rows)):
                self.param_texts[name] = f"({_text(node)})"  # C's quotient, which the definition above is exactly
        return name

    def _in_scope(self, name: str, use: ts.Node) -> None:
        """A name the nest declares is that declaration only after it and inside its block (before it, or after the
        block, the name is something else: a parameter, a global): anything else is Unknown."""
        decl = (self.locals[name][0] if name in self.locals else self.arrays[name][0] if name in self.arrays
                else self.rows[name][2] if name in self.rows else None)
        if decl is None:
            return
        block = decl.parent
        if block is None or not decl.end_byte <= use.start_byte < block.end_byte:
            raise Unknown(f"line {use.start_point[0] + 1}: `{name}` is used where the nest's declaration of it is not in scope")

    def _row_pointer(self, d: ts.Node, derivs: tuple[str, ...]) -> tuple[str, ts.Node | None] | None:
        """A pointer declared in the nest as a view into one array at an offset that the loops around it fix
        (`const double *xr = x + r * C;`, `double *row = &a[i * n]`, `double *ci = c[i]` for a 2-D c): its element
        `xr[e]` is that array's element at offset + e. (array, offset node or None); None for any other pointer."""
        if derivs != ("*",) or d.type != "init_declarator":
            return None
        value = _field(d, "value")
        value = _unparen(value)
        base, offset = value, None
        if value is not None and value.type == "binary_expression" and _text(_field(value, "operator")) == "+":
            left, right = _field(value, "left"), _field(value, "right")
            base, offset = (left, right) if left is not None and left.type == "identifier" and self._flat(_text(left)) else (right, left)
        elif value is not None and value.type == "pointer_expression" and _text(_field(value, "operator")) == "&":
            inner = _field(value, "argument")
            if inner is not None and inner.type == "subscript_expression":
                base, offset = _field(inner, "argument"), _field(inner, "index")
        elif value is not None and value.type == "subscript_expression":  # a row of a 2-D array
            arr = _field(value, "argument")
            decl = self.decls.get(_text(arr)) if arr is not None and arr.type == "identifier" else None
            if decl is not None and len(decl.derivs) == 2 and decl.contiguous and _text(arr) not in self.arrays:
                return _text(arr), _field(value, "index")
            return None
        if base is None or base.type != "identifier" or not self._flat(_text(base)):
            return None
        return _text(base), offset

    def _flat(self, name: str) -> bool:
        """A one-level array or pointer a row pointer may view (not another row pointer, not an array of the nest,
        whose elements are indexed by the loops around it too)."""
        decl = self.decls.get(name)
        return decl is not None and len(decl.derivs) == 1 and name not in self.rows and name not in self.arrays

    def _constant_init(self, name: str) -> ts.Node:
        """The initializer of an integer local that nothing writes after its declaration (`long p = i * n + s;`):
        in an index it stands for that expression (of the enclosing loops' variables, which do not change in its
        block). Unknown for any other local."""
        node, _, kind = self.locals[name]
        for d in node.children_by_field_name("declarator"):
            if d.type == "init_declarator" and _text(_field(d, "declarator")) == name and kind == "int" \
                    and _wide(_text(_field(node, "type"))):  # `unsigned char d = 257;` is 1, not 257
                value = _field(d, "value")
                if value is not None and value.type != "initializer_list":
                    return value
        raise Unknown(f"`{name}` in an index or bound is not a loop variable or an integer parameter")

    def affine(self, node: ts.Node | None, loop_vars: set[str]) -> str:
        p = self.poly(node, loop_vars)
        if any(len(m) > 1 and any(v in loop_vars or v in self.local_remainders for v in m) for m in p):
            raise Unknown(f"`{_text(node)}` is not affine")
        self.params.update("*".join(m) for m in p if len(m) > 1)
        return _isl_poly(p, loop_vars)

    def condition(self, node: ts.Node | None, loop_vars: set[str]) -> list[str]:
        """A conjunction of affine comparisons as isl constraints, or Unknown, so the branch is taken as maybe
        running. Unknown too where unsigned arithmetic enters: a subtraction may wrap on purpose (`if (i - 1 >= n)`
        at i = 0), and a comparison with an unsigned value converts the other side (`4u < n` holds for n = -1)."""
        node = _unparen(node)
        if node is not None and self.unsigned(node):
            raise Unknown("unsigned values in a condition")
        op = _text(_field(node, "operator"))
        if node is not None and node.type == "binary_expression" and op == "&&":
            return self.condition(_field(node, "left"), loop_vars) + self.condition(_field(node, "right"), loop_vars)
        if node is None or node.type != "binary_expression" or op not in _CMP:
            raise Unknown("not an affine condition")
        return [f"{self.affine(_field(node, 'left'), loop_vars)} {_CMP[op]} {self.affine(_field(node, 'right'), loop_vars)}"]

    def _if_condition(self, node: ts.Node | None, loop_vars: set[str]) -> list[str]:
        """An `if` condition's constraints (condition), where quotients and remainders of loop variables may appear
        (`if ((i + j) % 2 == 0)`): each exists-quantified with its definition."""
        self.bound = []
        try:
            cons = self.condition(node, loop_vars)
            defs = self.bound
        finally:
            self.bound = None
        if not defs:
            return cons
        names = ", ".join(r for r, _ in defs)
        return [f"exists ({names} : {' and '.join([d for _, d in defs] + cons)})"]

    def _limit(self, v: str, op: str, node: ts.Node | None, loop_vars: set[str]) -> str:
        """`v op E` for a loop's start or bound E as an isl constraint. E may choose by one affine comparison (a tile's
        point loop, `i < (ii + 32 < n ? ii + 32 : n)`): `(c and v op x) or (not c and v op y)`, exactly."""
        node = _unparen(node)
        if node is None or node.type != "conditional_expression":
            return f"{v} {op} {self.affine(node, loop_vars)}"
        if self.unsigned(node):  # `(m < n ? m : n)` with n unsigned compares, and is, unsigned
            raise Unknown(f"`{_text(node)}`: a conditional bound on unsigned values")
        test = _field(node, "condition")
        test = _unparen(test)
        cmp = _text(_field(test, "operator")) if test is not None else ""
        if test is None or test.type != "binary_expression" or cmp not in _NOT:
            raise Unknown(f"`{_text(node)}`: a conditional bound that does not test one comparison")
        [yes] = self.condition(test, loop_vars)  # refuses a subtraction on unsigned values
        x, y = _field(node, "consequence"), _field(node, "alternative")
        a, b = _text(_field(test, "left")).strip(), _text(_field(test, "right")).strip()
        if x is not None and y is not None and (_text(x).strip(), _text(y).strip()) == (a, b) and \
                (cmp in ("<", "<=")) == (op in ("<", "<=")):  # min(a, b) as an upper bound, max(a, b) as a lower one
            return f"{self._limit(v, op, x, loop_vars)} and {self._limit(v, op, y, loop_vars)}"
        no = f"{self.affine(_field(test, 'left'), loop_vars)} {_NOT[cmp]} {self.affine(_field(test, 'right'), loop_vars)}"
        return f"(({yes} and {self._limit(v, op, x, loop_vars)}) or ({no} and {self._limit(v, op, y, loop_vars)}))"

    # --- loops and statements ------------------------------------------------------------------------
    def _loop(self, node: ts.Node, outer: tuple[int, ...], position: list[int]) -> None:
        loop_vars = {self.loops[i].var for i in outer}
        init, cond, upd = _field(node, "initializer"), _field(node, "condition"), _field(node, "update")
        var, start, ty = None, None, ""
        if init is not None and init.type == "declaration":
            ds = init.children_by_field_name("declarator")
            if len(ds) == 1 and ds[0].type == "init_declarator":
                name = _field(ds[0], "declarator")
                if name is not None and name.type == "identifier" and _INT_TYPES.search(_text(_field(init, "type"))):
                    var, start, ty = _text(name), _field(ds[0], "value"), _text(_field(init, "type"))
        elif init is not None and init.type == "assignment_expression" and _text(_field(init, "operator")) == "=":
            left = _field(init, "left")
            d = self.decls.get(_text(left))
            if left is not None and left.type == "identifier" and (d is None or (not d.derivs and d.scalar == "int")):
                var, start = _text(left), _field(init, "right")
                ty = _text(_field(d.node, "type")) if d is not None and d.node is not None else ""
        if var is None or start is None or cond is None or upd is None:
            raise Unknown(f"line {node.start_point[0] + 1}: not a counted loop over an integer")
        if var in loop_vars:
            raise Unknown(f"line {node.start_point[0] + 1}: the loop variable `{var}` shadows an enclosing one")
        step = self._step(upd, var, node)
        if abs(step) > 1 and (not _WIDE.fullmatch(_plain_type(ty)) or var in self.unsigned_names):
            # `unsigned char i ...; i += 10` may wrap past the bound and go on (`i++` cannot skip it)
            raise Unknown(f"line {node.start_point[0] + 1}: a step of {step} on `{var}`, not a signed type of 32 bits or more")
        # the variable may be written only by the header
        for n in _walk(_field(node, "body")):
            t = _field(n, "left") if n.type == "assignment_expression" else (
                _field(n, "argument") if n.type == "update_expression" else None)
            if t is not None and _text(t) == var:
                raise Unknown(f"line {node.start_point[0] + 1}: the body writes the loop variable `{var}`")
        op, left, right = _text(_field(cond, "operator")), _field(cond, "left"), _field(cond, "right")
        if cond.type != "binary_expression" or op not in ("<", "<=", ">", ">="):
            raise Unknown(f"line {node.start_point[0] + 1}: the loop condition is not a comparison")
        if right is not None and right.type == "identifier" and _text(right) == var:
            op, left, right = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}[op], right, left
        if left is None or left.type != "identifier" or _text(left) != var:
            raise Unknown(f"line {node.start_point[0] + 1}: the loop condition does not compare the variable")
        if (step > 0) != (op in ("<", "<=")):
            raise Unknown(f"line {node.start_point[0] + 1}: the condition and the step disagree")
        v = _ident(var)
        self.bound = []
        cons = [c for c in (self._bound(v, ">=" if step > 0 else "<=", start, loop_vars, abs(step) > 1),
                            self._bound(v, op, right, loop_vars, False)) if c is not None]
        if abs(step) > 1:  # `i += 4`: the values lo, lo + 4, ... (an affine lo only)
            lo = self.affine(start, loop_vars)
            cons.append(f"({v} - ({lo})) mod {step} = 0" if step > 0 else f"(({lo}) - {v}) mod {-step} = 0")
        if self.bound:  # `j >= n - (n - i) % 4`: the remainder's value, for each i
            names = ", ".join(r for r, _ in self.bound)
            cons = [f"exists ({names} : {' and '.join([d for _, d in self.bound] + cons)})"]
        self.bound = None
        index = len(self.loops)
        self.loops.append(LoopInfo(index, var, step, len(outer), outer[-1] if outer else None, node))
        self.bounds[index] = cons
        inexact = len(cons) < 2 + (abs(step) > 1)
        if inexact:
            self.inexact.add(index)
        self.maybe += inexact
        self._body(_field(node, "body"), (*outer, index), list(position), [])
        self.maybe -= inexact

    def _bound(self, v: str, op: str, node: ts.Node | None, loop_vars: set[str], strided: bool) -> str | None:
        """A loop's start or bound as a constraint (_limit); with `approximate`, None (no constraint: the loop's
        statements may run for any value) for a data-dependent one that only reads what the nest does not write
        (`k < rowptr[i + 1]`: the read matters to no dependence) and has no effect (no call, no assignment)."""
        try:
            return self._limit(v, op, node, loop_vars)
        except Unknown:
            if not self.approximate or node is None or strided or \
                    not any(x.type == "subscript_expression" for x in _walk(node)):  # data-dependent ones only
                raise
            for x in _walk(node):
                if x.type in ("call_expression", "assignment_expression", "update_expression", "comma_expression") or (
                        x.type == "identifier" and (_text(x) in self.written or _text(x) in self.updated
                                                    or _text(x) in self.locals or _text(x) in self.rows)):
                    raise
            return None

    def _step(self, upd: ts.Node, var: str, loop: ts.Node) -> int:
        """The loop's constant step: `i++` 1, `i -= 2` -2, `i = i + 4` 4 (a constant or a macro of one)."""
        if upd.type == "update_expression" and _text(_field(upd, "argument")) == var:
            return 1 if "++" in _text(upd) else -1
        amount, sign = None, 0
        if upd.type == "assignment_expression" and _text(_field(upd, "left")) == var:
            op, right = _text(_field(upd, "operator")), _field(upd, "right")
            if op in ("+=", "-="):
                amount, sign = right, 1 if op == "+=" else -1
            elif op == "=" and right is not None and right.type == "binary_expression" and \
                    _text(_field(right, "left")) == var and _text(_field(right, "operator")) in ("+", "-"):
                amount, sign = _field(right, "right"), 1 if _text(_field(right, "operator")) == "+" else -1
        if amount is not None and amount.type in ("number_literal", "identifier", "parenthesized_expression") and \
                not _names_in(amount) - set(self.macros):
            c = self.poly(amount, set()).get((), 0)
            if c > 0:
                return sign * c
        raise Unknown(f"line {loop.start_point[0] + 1}: the step of `{var}` is not a positive constant")

    def _body(self, body: ts.Node | None, loops: tuple[int, ...], position: list[int], constraints: list[str]) -> None:
        """Statements of a loop body in execution order; position[-1] counts them."""
        items = [body] if body is not None and body.type != "compound_statement" else (
            [c for c in body.named_children if c.type != "comment"] if body is not None else [])
        loop_vars = {self.loops[i].var for i in loops}
        for item in items:
            t = item.type
            if t == "for_statement":
                self._loop(item, loops, [*position[:len(loops)], self._next(position, loops)])
            elif t == "compound_statement":
                self._body(item, loops, position, constraints)
            elif t in ("expression_statement", "declaration"):
                self._statement(item, loops, position, constraints)
            elif t == "if_statement":
                cond = _field(item, "condition")
                maybe = 0
                try:
                    extra = self._if_condition(cond, loop_vars)
                except Unknown:  # data-dependent: the condition reads are a statement, both branches may run
                    if cond is None:
                        raise
                    self._statement(cond, loops, position, constraints)
                    extra, maybe = [], 1
                self.maybe += maybe
                self._body(_field(item, "consequence"), loops, position, constraints + extra)
                alt = _field(item, "alternative")
                if alt is not None:  # the else branch of an affine condition runs where it does not hold: may run
                    alt_body = alt.named_children[0] if alt.type == "else_clause" and alt.named_child_count else alt
                    self.maybe += 1 - maybe
                    self._body(alt_body, loops, position, constraints)
                    self.maybe -= 1 - maybe
                self.maybe -= maybe
            elif t == "empty_statement" or (t == "expression_statement" and not item.named_child_count):
                continue
            else:
                raise Unknown(f"line {item.start_point[0] + 1}: a `{t.replace('_statement', '')}` statement in the nest")

    @staticmethod
    def _next(position: list[int], loops: tuple[int, ...]) -> int:
        while len(position) <= len(loops):
            position.append(0)
        value = position[len(loops)]
        position[len(loops)] += 1
        return value

    def _statement(self, node: ts.Node, loops: tuple[int, ...], position: list[int], constraints: list[str]) -> None:
        loop_vars = {self.loops[i].var for i in loops}
        accesses: list[Access] = []
        if node.type == "declaration":
            for d in node.children_by_field_name("declarator"):
                if _declarator(d)[0] in self.rows:  # a row pointer: its elements are its array's at this offset
                    self._row_offset(_declarator(d)[0], loop_vars, loops, accesses)
                    continue
                if _declarator(d)[0] in self.arrays:
                    self.arrays[_declarator(d)[0]] = (node, loops)  # one array per iteration of these loops
                    continue
                if d.type == "init_declarator":
                    name = _text(_field(d, "declarator"))
                    self.locals[name] = (node, loops, _scalar_kind(_text(_field(node, "type"))))
                    accesses.append(self._scalar(name, True, loops))
                    self._reads(_field(d, "value"), loop_vars, loops, accesses)
                elif d.type == "identifier":
                    self.locals[_text(d)] = (node, loops, _scalar_kind(_text(_field(node, "type"))))
            if not accesses:
                return
        else:
            self._reads(node, loop_vars, loops, accesses)
        pos = (*position[:len(loops)], self._next(position, loops))
        self.stmts.append(Stmt(f"S{len(self.stmts)}", loops, pos, list(constraints), accesses, node, self.maybe == 0))

    def _scalar(self, name: str, write: bool, loops: tuple[int, ...]) -> Access:
        if name in self.locals:
            _, declared_in, _ = self.locals[name]
            if declared_in[:len(declared_in)] != loops[:len(declared_in)]:
                raise Unknown(f"`{name}` is used outside the block that declares it")
            return Access(f"{name}@{self.locals[name][0].start_byte}", write,
                          tuple({(self.loops[i].var,): 1} for i in declared_in), name)
        decl = self.decls.get(name)
        if decl is not None and decl.derivs:
            raise Unknown(f"the pointer or array `{name}` is used as a value")
        return Access(name, write, (), name)

    def _reads(self, node: ts.Node | None, loop_vars: set[str], loops: tuple[int, ...], out: list[Access]) -> None:
        """Every access in an expression (writes for assignment targets and ++/--)."""
        if node is None:
            return
        t = node.type
        if t in ("number_literal", "string_literal", "char_literal", "true", "false", "null", "comment",
                 "sizeof_expression", "primitive_type", "type_descriptor"):
            return
        if t == "identifier":
            name = _text(node)
            if name in loop_vars or name in self.macros:
                return
            if name in self.loop_names:
                raise Unknown(f"the loop variable `{name}` is read outside its loop")
            self._in_scope(name, node)
            decl = self.decls.get(name)
            if name in self.locals or name in self.written or (decl is not None and not decl.derivs):
                if name in self.locals or name in self.written:
                    out.append(self._scalar(name, False, loops))
                return  # a scalar nobody writes in the nest: a parameter
            if decl is not None:
                raise Unknown(f"the pointer or array `{name}` is used as a value")
            return  # an undeclared name (a macro)
        if t == "assignment_expression":
            target, op = _field(node, "left"), _text(_field(node, "operator"))
            self._target(target, loop_vars, loops, out, read=op != "=")
            self._reads(_field(node, "right"), loop_vars, loops, out)
            return
        if t == "update_expression":
            self._target(_field(node, "argument"), loop_vars, loops, out, read=True)
            return
        if t == "subscript_expression":
            out.append(self._element(node, False, loop_vars, loops, out))
            return
        if t == "call_expression":
            callee = _text(_field(node, "function"))
            if callee not in PURE and (callee not in self.pure or callee in self.shadowing):
                raise Unknown(f"a call to `{_text(_field(node, 'function'))}`")
            self._reads(_field(node, "arguments"), loop_vars, loops, out)
            return
        if t == "cast_expression":
            self._reads(_field(node, "value"), loop_vars, loops, out)
            return
        if t == "field_expression":  # a struct member read as a value: an object of its own
            decl = self._member_decl(node)
            if decl.derivs:
                raise Unknown(f"the pointer or array `{decl.name}` is used as a value")
            out.append(Access(decl.name, False, (), decl.name))
            return
        if t == "pointer_expression" or t == "comma_expression":
            raise Unknown(f"`{_text(node)}`: pointers, dereferences and commas are outside the model")
        if t in ("expression_statement", "parenthesized_expression", "binary_expression", "unary_expression",
                 "conditional_expression", "argument_list", "condition_clause"):
            for c in node.named_children:
                self._reads(c, loop_vars, loops, out)
            return
        raise Unknown(f"`{_text(node)}` ({t}) is outside the model")

    def _row_offset(self, row: str, loop_vars: set[str], loops: tuple[int, ...], out: list[Access]) -> None:
        """At a row pointer's declaration: its offset's value there (None where it is not affine) and its reads."""
        _, offset, _ = self.rows[row]
        if offset is None:
            self.row_offsets[row] = {}
            return
        self._reads(offset, loop_vars, loops, out)
        try:
            p = self.poly(offset, loop_vars)
        except Unknown:
            self.row_offsets[row] = None
            return
        later = {v for m in p for v in m if v in self.loop_names and v not in loop_vars}
        if later:  # a parameter named like a loop of the nest: the value would be read as that loop's later
            raise Unknown(f"`{sorted(later)[0]}` in the offset of `{row}` names a loop variable of the nest too")
        self.row_offsets[row] = p

    def _row_element(self, node: ts.Node, row: str, subs: list[ts.Node | None], write: bool, loop_vars: set[str],
                     loops: tuple[int, ...], out: list[Access]) -> Access:
        """`xr[e]` through a row pointer of the nest: the element of its array at the row's offset + e."""
        if len(subs) != 1:
            raise Unknown(f"`{_text(node)}`: a row pointer subscripted twice")
        name = self.rows[row][0]
        offset = self.row_offsets[row]
        decl = self.decls[name]
        if not write:
            self._reads(subs[0], loop_vars, loops, out)
        dims: tuple[Poly, ...] | None
        try:
            sub = self.poly(subs[0], loop_vars)
            if offset is None:
                dims = None
            elif len(decl.derivs) == 2:  # `double *ci = c[i]`: ci[j] is c[i][j]
                dims = (offset, sub)
                if any(len(m) > 1 for d in dims for m in d):
                    dims = None
            else:
                dims = (_add(offset, sub),)
        except Unknown:
            dims = None
        return Access(name, write, dims, _text(node))

    def _local_element(self, node: ts.Node, array: str, subs: list[ts.Node | None], write: bool, loop_vars: set[str],
                       loops: tuple[int, ...], out: list[Access]) -> Access:
        """`t[e]` on an array declared in the nest: a fresh array per iteration of the loops around its
        declaration, so those loops' variables index it too."""
        where, declared_in = self.arrays[array]
        if declared_in != loops[:len(declared_in)]:
            raise Unknown(f"`{array}` is used outside the block that declares it")
        if not write:
            for sub in subs:
                self._reads(sub, loop_vars, loops, out)
        name = f"{array}@{where.start_byte}"
        try:
            own = tuple(self.poly(sub, loop_vars) for sub in subs)
        except Unknown:
            return Access(name, write, None, _text(node))
        outer: tuple[Poly, ...] = tuple({(self.loops[i].var,): 1} for i in declared_in)
        return Access(name, write, outer + own, _text(node))

    def _member_decl(self, node: ts.Node) -> Decl:
        """The Decl of a struct member `P->f` / `P.f` (registered under that name, so aliasing questions about it
        are answered like any other pointer's), or Unknown."""
        arg = _field(node, "argument")
        owner = self.decls.get(_text(arg)) if arg is not None and arg.type == "identifier" else None
        if owner is None or owner.where == "field" or _text(arg) in self.written:
            raise Unknown(f"`{_text(node)}`: a member of a struct this analysis cannot see")
        decl = _member(self.root, owner, node)
        if decl is None:
            raise Unknown(f"`{_text(node)}`: a member of a struct this analysis cannot see")
        self.decls[decl.name] = decl
        return decl

    def _target(self, node: ts.Node | None, loop_vars: set[str], loops: tuple[int, ...], out: list[Access], read: bool) -> None:
        node = _unparen(node)
        if node is not None and node.type == "identifier":
            name = _text(node)
            if name in loop_vars:
                raise Unknown(f"the loop variable `{name}` is written")
            self._in_scope(name, node)
            out.extend([self._scalar(name, False, loops)] if read else [])
            out.append(replace(self._scalar(name, True, loops), may=_conditional(node)))
            return
        if node is not None and node.type == "subscript_expression":
            if read:
                out.append(self._element(node, False, loop_vars, loops, out))
            out.append(replace(self._element(node, True, loop_vars, loops, out), may=_conditional(node)))
            return
        raise Unknown(f"an assignment to `{_text(node)}`")

    def _element(self, node: ts.Node, write: bool, loop_vars: set[str], loops: tuple[int, ...], out: list[Access]) -> Access:
        """The access `X[e1]...[ek]`; subscripts outside the model are kept as None (and decide later
        whether the nest is Unknown: only if X is written or may overlap a written array)."""
        subs: list[ts.Node | None] = []
        base: ts.Node | None = node
        while base is not None and base.type == "subscript_expression":
            subs.insert(0, _field(base, "index"))
            base = _field(base, "argument")
        if base is not None and base.type == "identifier":
            self._in_scope(_text(base), base)
        if base is not None and base.type == "identifier" and _text(base) in self.rows:
            return self._row_element(node, _text(base), subs, write, loop_vars, loops, out)
        if base is not None and base.type == "identifier" and _text(base) in self.arrays:
            return self._local_element(node, _text(base), subs, write, loop_vars, loops, out)
        decl: Decl | None
        if base is not None and base.type == "field_expression":
            decl = self._member_decl(base)
            name = decl.name
        elif base is None or base.type != "identifier":
            raise Unknown(f"`{_text(node)}`: the array is not a plain name or a struct member")
        else:
            name = _text(base)
            decl = self.decls.get(name)
        for s in subs:
            if not write:  # the subscripts' own reads (x[idx[i]] reads idx[i]); a target's were read already
                self._reads(s, loop_vars, loops, out)
        defs: list[tuple[str, str]] = []
        parts: list[Poly | None] = []
        for s in subs:
            try:
                self.bound = defs  # a loop variable's quotient or remainder (`x[i / 2]`), defined in the access relation
                part: Poly | None = self.poly(s, loop_vars)
            except Unknown:
                part = None
            finally:
                self.bound = None
            if part is not None and any(len(m) > 1 and any(v in self.local_remainders for v in m) for m in part):
                part = None  # a product with one (`x[(i % 2) * n]`): not affine
            if part is not None and len(subs) > 1 and any(len(m) > 1 for m in part):
                part = None
            parts.append(part)
        if decl is None or not decl.derivs or len(subs) != len(decl.derivs) or not decl.contiguous:
            return Access(name, write, None, _text(node))  # unknown object, a partial subscript, or rows through pointers
        if all(x is not None for x in parts):
            return Access(name, write, tuple(x for x in parts if x is not None), _text(node), defs=tuple(defs))
        free = tuple(k for k, x in enumerate(parts) if x is None)
        if self.approximate and len(free) < len(parts):  # `sums[best][d]`: any row, column d
            return Access(name, write, tuple(x or {} for x in parts), _text(node), defs=tuple(defs), free=free)
        # an element of a known array through a subscript outside the model (`x[col[k]]`): any of its elements
        return Access(name, write, None, _text(node), whole=self.approximate)


def _conditional(node: ts.Node) -> bool:
    """The expression runs only on some evaluations of its statement: inside a conditional expression or an operand
    of `&&` / `||`."""
    for a in _ancestors(node):
        if a.type in ("expression_statement", "declaration", "for_statement", "if_statement", "compound_statement"):
            return False
        if a.type == "conditional_expression" or (a.type == "binary_expression" and _text(_field(a, "operator")) in ("&&", "||")):
            return True
    return False


def _split(p: Poly, loop_vars: set[str]) -> dict[tuple[str, ...], Poly] | None:
    """A flat subscript grouped by parameter monomial: `i * n + j + n` -> {(n,): i + 1, (): j}."""
    parts: dict[tuple[str, ...], Poly] = {}
    for mono, c in p.items():
        vs = [m for m in mono if m in loop_vars]
        if len(vs) > 1:
            return None
        params = tuple(m for m in mono if m not in loop_vars)
        key = (vs[0],) if vs else ()
        part = parts.setdefault(params, {})
        part[key] = part.get(key, 0) + c
    return parts


def _chain(monos: set[tuple[str, ...]]) -> list[tuple[str, ...]] | None:
    """The strides 1, p1, p1*p2, ... (each the previous times one parameter) covering `monos`, or None."""
    chain = sorted(monos | {()}, key=len)
    for a, b in zip(chain, chain[1:], strict=False):
        rest = list(b)
        for m in a:
            if m not in rest:
                return None
            rest.remove(m)
        if len(rest) != 1:
            return None
    return chain


def _loop_name(n: ts.Node) -> str:
    init = _field(n, "initializer")
    if init is not None and init.type == "declaration":
        ds = init.children_by_field_name("declarator")
        return _text(_field(ds[0], "declarator")) if len(ds) == 1 and ds[0].type == "init_declarator" else ""
    if init is not None and init.type == "assignment_expression":
        return _text(_field(init, "left"))
    return ""
