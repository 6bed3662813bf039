"""`kernopt task new`: a C-family task directory from a kernel file of your own.

The function's signature is read with tree-sitter: each pointer parameter is a buffer (pointee
`const`: an input, otherwise an output), an integer scalar is a size (an expression of the task's
size n, default `n`), a floating-point scalar is a parameter (drawn from the seed, or fixed), a
pointer to a struct defined in the file is a struct of arrays (each pointer member a buffer named
`param.member`), and a scalar return value is a one-element output named `return`. Every buffer's
element count is an expression of n and the integer sizes; the user confirms each (prompts) or
gives them as options. The harness is generated in the format of tasks/openmp/*/harness.c, the
timing size is calibrated by running the baseline (unless given), and the task is then checked.
"""

from __future__ import annotations

import ast
import math
import re
import secrets
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import tree_sitter as ts
import tree_sitter_c as tsc

from kernopt.errors import TaskError

Ask = Callable[[str, str], str]

# C base types (qualifiers dropped, words in order) -> kernopt.h dtype and its element size
_DTYPES: dict[str, tuple[str, int]] = {
    "double": ("KO_F64", 8), "float": ("KO_F32", 4),
    "int": ("KO_I32", 4), "signed int": ("KO_I32", 4), "signed": ("KO_I32", 4), "unsigned int": ("KO_I32", 4),
    "unsigned": ("KO_I32", 4), "int32_t": ("KO_I32", 4), "uint32_t": ("KO_I32", 4),
    "long": ("KO_I64", 8), "long int": ("KO_I64", 8), "long long": ("KO_I64", 8), "long long int": ("KO_I64", 8),
    "unsigned long": ("KO_I64", 8), "unsigned long long": ("KO_I64", 8), "int64_t": ("KO_I64", 8), "uint64_t": ("KO_I64", 8),
    "size_t": ("KO_I64", 8), "ptrdiff_t": ("KO_I64", 8), "ssize_t": ("KO_I64", 8),
    "char": ("KO_U8", 1), "signed char": ("KO_U8", 1), "unsigned char": ("KO_U8", 1), "uint8_t": ("KO_U8", 1), "int8_t": ("KO_U8", 1),
}
_INTEGER = {k for k, (d, _) in _DTYPES.items() if d != "KO_F64" and d != "KO_F32"}
_ROLES = {"in": "KO_IN", "out": "KO_OUT", "inout": "KO_INOUT", "scratch": "KO_IN"}  # scratch: an input it may overwrite
CHECK_SIZES = [1, 2, 3, 7, 33]
MAX_BYTES = 1 << 30  # calibration stops growing n before the buffers pass 1 GiB (the sandbox's cap is 4 GiB)
MAX_OUT_BYTES = 128 << 20  # ... or the outputs pass 128 MiB (each call's are written to a file; the sandbox's largest is 512 MiB)


@dataclass
class Scalar:
    name: str  # parameter name, or "param.member"
    ctype: str
    integer: bool
    expr: str = ""  # integer: the value as an expression of n; float: a fixed value, or "" (drawn per seed)


@dataclass
class Buffer:
    name: str  # parameter name, "param.member", or "return"
    ctype: str
    role: str  # in | out | inout
    size: str = "n"  # element count, an expression of n and the integer sizes
    fill: tuple[str, str] | None = None  # inputs: [lo, hi) as expressions

    @property
    def dtype(self) -> str:
        return _DTYPES[self.ctype][0]

    @property
    def floating(self) -> bool:
        return self.dtype in ("KO_F64", "KO_F32")


@dataclass
class Param:
    """One parameter of the function, in order."""

    name: str
    kind: str  # scalar | buffer | struct_ptr | struct_val
    struct: str = ""  # the struct's C type text (struct kinds)
    members: list[str] = field(default_factory=list)  # struct kinds: member names, in order


@dataclass
class Plan:
    function: str
    signature: str  # the declaration as written (without the body)
    return_type: str  # "" for void
    params: list[Param]
    scalars: dict[str, Scalar]
    buffers: dict[str, Buffer]
    preamble: list[str]  # #include lines and the struct/typedef definitions the prototype needs


_PARSER = ts.Parser(ts.Language(tsc.language()))


def _text(node: ts.Node) -> str:
    return node.text.decode() if node.text is not None else ""


def _base_type(node: ts.Node) -> tuple[str, bool, ts.Node | None, int]:
    """(base type words without qualifiers, pointee const?, declarator node, pointer depth) of a
    parameter_declaration or field_declaration."""
    const = any(c.type == "type_qualifier" and _text(c) == "const" for c in node.children)
    tnode = node.child_by_field_name("type")
    base = " ".join(_text(tnode).split()) if tnode is not None else ""
    decl = node.child_by_field_name("declarator")
    depth = 0
    while decl is not None and decl.type in ("pointer_declarator", "array_declarator", "abstract_pointer_declarator"):
        depth += 1
        decl = decl.child_by_field_name("declarator")
    return base, const, decl, depth


def _structs(root: ts.Node) -> dict[str, tuple[ts.Node, ts.Node]]:
    """Struct types defined at the top level: type text ("struct s", or a typedef name) -> (the field
    list, the top-level declaration to copy into the harness)."""
    out: dict[str, tuple[ts.Node, ts.Node]] = {}
    for top in root.children:
        specs = [top] if top.type == "struct_specifier" else [c for c in top.children if c.type == "struct_specifier"]
        for spec in specs:
            body = spec.child_by_field_name("body")
            if body is None:
                continue
            name = spec.child_by_field_name("name")
            if name is not None:
                out[f"struct {_text(name)}"] = (body, top)
            if top.type == "type_definition":
                for c in top.children:
                    if c.type == "type_identifier" and c != name:
                        out[_text(c)] = (body, top)
    return out


def parse_kernel(source: str, function: str) -> Plan:
    """The function's parameters, classified. TaskError (one line) for what a generated harness cannot serve."""
    tree = _PARSER.parse(source.encode())
    root = tree.root_node
    fn = None
    for top in root.children:
        if top.type != "function_definition":
            continue
        decl = top.child_by_field_name("declarator")
        if decl is not None and decl.type == "function_declarator":
            ident = decl.child_by_field_name("declarator")
            if ident is not None and _text(ident) == function:
                fn = top
    if fn is None:
        names = []
        for top in root.children:
            d = top.child_by_field_name("declarator") if top.type == "function_definition" else None
            if d is not None and d.type == "function_declarator" and d.child_by_field_name("declarator") is not None:
                names.append(_text(d.child_by_field_name("declarator")))  # type: ignore[arg-type]
        raise TaskError(f"no definition of function {function!r} here (functions defined: {', '.join(names) or 'none'}; "
                        "a function returning a pointer is not supported)")
    if any(_text(c) == "static" for c in fn.children if c.type == "storage_class_specifier"):
        raise TaskError(f"{function} is static: the task's function must have external linkage")
    body = fn.child_by_field_name("body")
    assert body is not None
    signature = " ".join(source.encode()[fn.start_byte:body.start_byte].decode().split())
    rtype = fn.child_by_field_name("type")
    ret = " ".join(_text(rtype).split()) if rtype is not None else "int"
    structs = _structs(root)
    preamble = [ln for ln in source.splitlines() if re.match(r"\s*#\s*include\s*<", ln)]
    copied: list[ts.Node] = []
    params: list[Param] = []
    scalars: dict[str, Scalar] = {}
    buffers: dict[str, Buffer] = {}
    decl = fn.child_by_field_name("declarator")
    plist = decl.child_by_field_name("parameters") if decl is not None else None
    for p in plist.named_children if plist is not None else []:
        if p.type == "variadic_parameter":
            raise TaskError(f"{function} is variadic: not supported")
        if p.type != "parameter_declaration":
            continue
        base, const, ident, depth = _base_type(p)
        if ident is None or ident.type != "identifier":
            if base == "void" and depth == 0:
                continue  # f(void)
            raise TaskError(f"parameter {_text(p)!r} of {function} has no name")
        name = _text(ident)
        if base in structs:
            if depth > 1:
                raise TaskError(f"parameter {name}: a pointer to a pointer to a struct is not supported")
            members = _struct_members(name, structs[base][0], scalars, buffers, outer_const=const)
            if structs[base][1] not in copied:
                copied.append(structs[base][1])
            params.append(Param(name, "struct_ptr" if depth else "struct_val", base, members))
            continue
        if base not in _DTYPES:
            raise TaskError(f"parameter {name} has type {base!r}: supported are {', '.join(sorted(_DTYPES))} "
                            "and structs defined in the file")
        if depth > 1:
            raise TaskError(f"parameter {name}: pointers to pointers are not supported (use one flat buffer)")
        if depth == 1:
            buffers[name] = Buffer(name, base, "in" if const else "out")
            params.append(Param(name, "buffer"))
        else:
            scalars[name] = Scalar(name, base, base in _INTEGER, "n" if base in _INTEGER else "")
            params.append(Param(name, "scalar"))
    if ret != "void":
        if ret not in _DTYPES:
            raise TaskError(f"{function} returns {ret!r}: supported are void and {', '.join(sorted(_DTYPES))}")
        buffers["return"] = Buffer("return", ret, "out", "1")
    for node in sorted(copied, key=lambda n: n.start_byte):
        preamble.append(_text(node) + ("" if _text(node).rstrip().endswith(";") else ";"))
    if not buffers:
        raise TaskError(f"{function} has no pointer parameter and returns nothing: no output to compare")
    if not any(b.role != "in" for b in buffers.values()):
        raise TaskError(f"{function} has no output: every pointer is const and it returns void")
    return Plan(function, signature, "" if ret == "void" else ret, params, scalars, buffers, preamble)


def _struct_members(param: str, body: ts.Node, scalars: dict[str, Scalar], buffers: dict[str, Buffer],
                    outer_const: bool) -> list[str]:
    members = []
    for f in body.named_children:
        if f.type != "field_declaration":
            continue
        base, const, ident, depth = _base_type(f)
        if ident is None or base not in _DTYPES or depth > 1:
            raise TaskError(f"struct member {_text(f).strip()!r} of parameter {param}: supported are scalars and "
                            f"pointers of {', '.join(sorted(_DTYPES))}")
        name = f"{param}.{_text(ident)}"
        members.append(_text(ident))
        if depth:
            buffers[name] = Buffer(name, base, "in" if const else "out")
        else:
            scalars[name] = Scalar(name, base, base in _INTEGER, "n" if base in _INTEGER else "")
    if not members:
        raise TaskError(f"the struct of parameter {param} has no members")
    return members


# ---------------------------------------------------------------- size expressions
_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "/", ast.Mod: "%"}


def _expr_tree(text: str, names: set[str], what: str) -> ast.expr:
    src = text.strip()
    if not src or len(src) > 200:
        raise TaskError(f"{what}: {text!r} must be a short expression")
    try:
        tree = ast.parse(src.replace("^", "**"), mode="eval").body
    except SyntaxError:
        raise TaskError(f"{what}: {text!r} is not an expression (allowed: integers, {', '.join(sorted(names))}, "
                        "+ - * / % ^ and parentheses)") from None
    for node in ast.walk(tree):
        if isinstance(node, (ast.operator, ast.unaryop, ast.expr_context)):
            continue
        if isinstance(node, ast.BinOp) and (type(node.op) in _BINOPS or (
                isinstance(node.op, ast.Pow) and isinstance(node.right, ast.Constant) and node.right.value in (1, 2, 3, 4))):
            continue
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            continue
        if isinstance(node, ast.Constant) and type(node.value) is int:
            continue
        if isinstance(node, ast.Name) and node.id in names:
            continue
        if isinstance(node, ast.Name):
            raise TaskError(f"{what}: unknown name {node.id!r} in {text!r} (allowed: {', '.join(sorted(names))})")
        raise TaskError(f"{what}: {ast.unparse(node)!r} is not allowed in {text!r} "
                        "(integers, names, + - * / % ^ with a constant exponent, parentheses)")
    return tree


def _c_expr(node: ast.expr, cname: Callable[[str], str]) -> str:
    if isinstance(node, ast.Constant):
        return f"{node.value!s}L"
    if isinstance(node, ast.Name):
        return f"(long){cname(node.id)}"
    if isinstance(node, ast.UnaryOp):
        return f"(-{_c_expr(node.operand, cname)})"
    assert isinstance(node, ast.BinOp)
    left = _c_expr(node.left, cname)
    if isinstance(node.op, ast.Pow):
        assert isinstance(node.right, ast.Constant)
        return "(" + " * ".join([left] * int(node.right.value)) + ")"  # type: ignore[arg-type]
    return f"({left} {_BINOPS[type(node.op)]} {_c_expr(node.right, cname)})"


def _py_eval(node: ast.expr, values: dict[str, int]) -> int:
    """C semantics on longs: / and % truncate toward zero (division by zero: TaskError)."""
    if isinstance(node, ast.Constant):
        return int(node.value)  # type: ignore[arg-type]
    if isinstance(node, ast.Name):
        return values[node.id]
    if isinstance(node, ast.UnaryOp):
        return -_py_eval(node.operand, values)
    assert isinstance(node, ast.BinOp)
    a, b = _py_eval(node.left, values), _py_eval(node.right, values)
    if isinstance(node.op, ast.Pow):
        return int(a ** b)
    if isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)):
        if b == 0:
            raise TaskError(f"{ast.unparse(node)!r} divides by zero")
        q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
        return q if not isinstance(node.op, ast.Mod) else a - q * b
    return {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b}[type(node.op)]  # type: ignore[index]


def _cid(name: str) -> str:
    return "ko_v_" + re.sub(r"[^A-Za-z0-9_]", "_", name)


def sizes_at(plan: Plan, n: int) -> tuple[dict[str, int], dict[str, int]]:
    """(integer scalar values, buffer element counts) at size n, as the harness computes them."""
    values = {"n": n}
    ints = [s for s in plan.scalars.values() if s.integer]
    for s in ints:
        values[s.name] = _py_eval(_expr_tree(s.expr, {"n"}, f"size {s.name}"), values)
    names = {"n", *(s.name for s in ints)}
    counts = {b.name: max(0, _py_eval(_expr_tree(b.size, names, f"buffer {b.name}"), values)) for b in plan.buffers.values()}
    return values, counts


def buffer_bytes(plan: Plan, n: int, outputs: bool = False) -> int:
    """The bytes of every buffer (outputs: of the OUT and INOUT ones) at size n."""
    _, counts = sizes_at(plan, n)
    return sum(counts[b.name] * _DTYPES[b.ctype][1] for b in plan.buffers.values() if not outputs or b.role in ("out", "inout"))


# ---------------------------------------------------------------- answers
def _split(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise TaskError(f"--{what} {item!r}: expected NAME=VALUE")
        out[key.strip()] = value.strip()
    return out


def configure(plan: Plan, sizes: list[str], params: list[str], roles: list[str], fills: list[str],
              ask: Ask | None) -> None:
    """Apply the options (`--size a='n*n'`, `--param m=n/2` or a bare `--param n`, `--role c=inout`,
    `--fill idx=0:n`); ask (question, default) for what they leave open, or take the defaults when ask is None."""
    size_opts, role_opts, fill_opts = _split(sizes, "size"), _split(roles, "role"), _split(fills, "fill")
    param_opts = _split([p if "=" in p else f"{p}=n" for p in params], "param")
    known = set(plan.buffers) | set(plan.scalars)
    for key in [*size_opts, *role_opts, *fill_opts, *param_opts]:
        if key not in known:
            raise TaskError(f"{key!r} is not a parameter of {plan.function} (buffers: {', '.join(plan.buffers)}; "
                            f"scalars: {', '.join(plan.scalars) or 'none'})")
    for s in plan.scalars.values():
        if s.name in param_opts:
            s.expr = param_opts[s.name]
        elif ask is not None:
            q = (f"scalar {s.name} ({s.ctype}): its value, an expression of the size n" if s.integer else
                 f"scalar {s.name} ({s.ctype}): a fixed value, or empty to draw it from the seed in [0.5, 1.5)")
            s.expr = ask(q, s.expr).strip()
        if s.integer:
            _expr_tree(s.expr, {"n"}, f"size {s.name}")
        elif s.expr:
            try:
                float(s.expr)
            except ValueError:
                raise TaskError(f"parameter {s.name}: {s.expr!r} is not a number") from None
    names = {"n", *(s.name for s in plan.scalars.values() if s.integer)}
    for b in plan.buffers.values():
        if b.name in role_opts:
            if role_opts[b.name] not in _ROLES:
                raise TaskError(f"--role {b.name}={role_opts[b.name]}: expected in, out, inout or scratch")
            b.role = role_opts[b.name]
        elif ask is not None and b.name != "return":
            b.role = ask(f"buffer {b.name} ({b.ctype} *): role in (read only), out (written), inout (read and written) or "
                         "scratch (an input it may overwrite, not compared)",
                         b.role).strip()
            if b.role not in _ROLES:
                raise TaskError(f"buffer {b.name}: role {b.role!r}: expected in, out, inout or scratch")
        if b.name in size_opts:
            b.size = size_opts[b.name]
        elif ask is not None and b.name != "return":
            b.size = ask(f"buffer {b.name}: number of elements, an expression of {', '.join(sorted(names))}", b.size).strip()
        _expr_tree(b.size, names, f"buffer {b.name}")
        if b.role != "out":
            default = ("-1", "1") if b.floating else ("0", "256" if b.dtype == "KO_U8" else "1000")
            text = fill_opts.get(b.name)
            if text is None and ask is not None:
                text = ask(f"buffer {b.name}: inputs drawn uniformly from [lo, hi), as lo:hi", ":".join(default))
            lo, sep, hi = (text or ":".join(default)).partition(":")
            if not sep:
                raise TaskError(f"buffer {b.name}: fill {text!r}: expected lo:hi")
            for part in (lo, hi):
                if b.floating and _is_float(part):
                    continue
                _expr_tree(part, names, f"fill of {b.name}")
            b.fill = (lo.strip(), hi.strip())
        elif b.name in fill_opts:
            raise TaskError(f"--fill {b.name}: an output buffer is not filled")
    if not any(b.role in ("out", "inout") for b in plan.buffers.values()):
        raise TaskError(f"{plan.function}: no buffer is an output (out or inout): nothing to compare")
    for n in CHECK_SIZES:
        sizes_at(plan, n)  # division by zero and the like show now, not in the harness


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


# ---------------------------------------------------------------- writing
def harness_source(plan: Plan) -> str:
    ints = [s for s in plan.scalars.values() if s.integer]
    floats = [s for s in plan.scalars.values() if not s.integer]

    def cname(name: str) -> str:
        return "n" if name == "n" else _cid(name)

    def cexpr(text: str, names: set[str]) -> str:
        return _c_expr(_expr_tree(text, names, "expression"), cname)

    size_names = {"n", *(s.name for s in ints)}
    bufs = list(plan.buffers.values())
    lines = ["/* Generated by `kernopt task new` from the signature of " + plan.function + " (see docs/tasks.md).",
             " * Buffers: " + "; ".join(f"{b.name} {b.role} {b.ctype}[{b.size}]" for b in bufs) + ".",
             " * Task-owned and trusted: edit it only to change how inputs are drawn. */",
             "#include <stdlib.h>", "#include <string.h>", '#include "kernopt.h"', *plan.preamble, "",
             plan.signature + ";", ""]
    for s in ints:
        lines.append(f"static {s.ctype} {_cid(s.name)};")
    for s in floats:
        lines.append(f"static {s.ctype} {_cid(s.name)};")
    for b in bufs:
        lines.append(f"static {b.ctype} *{_cid(b.name)};")
    for p in plan.params:
        if p.kind.startswith("struct"):
            lines.append(f"static {p.struct} ko_s_{p.name};")
    lines += ["", "static void *ko_alloc(size_t count, size_t size) {",
              "    void *p = malloc(count ? count * size : size);",
              "    if (!p) abort();",
              "    return p;", "}", "",
              "static size_t ko_count(long c) { return c > 0 ? (size_t)c : 0; }", "",
              "int ko_setup(long n, ko_buf *bufs) {"]
    for s in ints:
        lines.append(f"    {_cid(s.name)} = ({s.ctype}){cexpr(s.expr, {'n'})};")
    for i, b in enumerate(bufs):
        c = _cid(b.name)
        lines += [f"    free({c});",
                  f"    size_t count{i} = ko_count({cexpr(b.size, size_names)});",
                  f"    {c} = ko_alloc(count{i}, sizeof *{c});",
                  f"    memset({c}, 0, (count{i} ? count{i} : 1) * sizeof *{c});",
                  f'    bufs[{i}] = (ko_buf){{"{b.name}", {b.dtype}, {_ROLES[b.role]}, count{i}, {c}}};']
    lines += [f"    return {len(bufs)};", "}", "", "void ko_fill(long n, uint64_t seed) {", "    uint64_t s = seed;", "    (void)n;"]
    for b in bufs:
        if b.role == "out" or b.fill is None:
            continue
        c = _cid(b.name)
        lo, hi = b.fill
        lo_c = lo if (b.floating and _is_float(lo)) else cexpr(lo, size_names)
        hi_c = hi if (b.floating and _is_float(hi)) else cexpr(hi, size_names)
        if b.ctype == "double":  # the vectorized fill (kernopt.h), from a seed of its own per buffer
            lines.append(f"    ko_fill_uniform({c}, (long)ko_count({cexpr(b.size, size_names)}), ko_rng_next(&s), "
                         f"(double)({lo_c}), (double)({hi_c}));")
            continue
        lines.append(f"    for (size_t i = 0, count = ko_count({cexpr(b.size, size_names)}); i < count; i++)")
        if b.floating:
            lines.append(f"        {c}[i] = ({b.ctype})ko_rng_uniform(&s, (double)({lo_c}), (double)({hi_c}));")
        else:
            lines += [f"    {{ long lo = {lo_c}, span = (long)({hi_c}) - lo; if (span < 1) span = 1;",
                      f"      {c}[i] = ({b.ctype})(lo + (long)(ko_rng_next(&s) % (uint64_t)span)); }}"]
    for s in floats:
        value = s.expr or "ko_rng_uniform(&s, 0.5, 1.5)"
        lines.append(f"    {_cid(s.name)} = ({s.ctype})({value});")
    for p in plan.params:  # the structs are rebuilt before every call: a kernel that wrote one gains nothing
        if p.kind.startswith("struct"):
            lines.append(f"    memset(&ko_s_{p.name}, 0, sizeof ko_s_{p.name});")
            for m in p.members:
                full = f"{p.name}.{m}"
                src = _cid(full)
                lines.append(f"    ko_s_{p.name}.{m} = {src};")
    lines += ["}", "", "void ko_call(long n) {", "    (void)n;"]
    args = []
    for p in plan.params:
        if p.kind == "struct_ptr":
            args.append(f"&ko_s_{p.name}")
        elif p.kind == "struct_val":
            args.append(f"ko_s_{p.name}")
        else:
            args.append(_cid(p.name))
    call = f"{plan.function}({', '.join(args)})"
    lines.append(f"    {_cid('return')}[0] = {call};" if plan.return_type else f"    {call};")
    lines += ["}", ""]
    return "\n".join(lines)


def _toml_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def task_toml(name: str, plan: Plan, kernel: str, target: str, timing: int, source_name: str) -> str:
    check = [n for n in CHECK_SIZES if n <= timing]
    hi = max(40, min(timing // 4, 100_000))
    lo = min(8, hi)
    f32 = any(b.dtype == "KO_F32" for b in plan.buffers.values() if b.role in ("out", "inout"))
    scratch = [b.name for b in plan.buffers.values() if b.role == "scratch"]
    tol = ("rtol = 1e-4\natol = 1e-6\nnorm_rtol = 1e-5" if f32 else "rtol = 1e-9\natol = 1e-12\nnorm_rtol = 1e-10")
    bufs = "; ".join(f"{b.name} ({b.role}, {b.ctype}[{b.size}])" for b in plan.buffers.values())
    scal = "; ".join(f"{s.name} = {s.expr or 'drawn from the seed in [0.5, 1.5)'}" for s in plan.scalars.values())
    desc = (f"{plan.function} from {source_name} (written by `kernopt task new`; say here what it computes).\n"
            f"Buffers, counts in terms of the size n: {bufs}." + (f"\nScalars: {scal}." if scal else ""))
    return "\n".join([
        f"name = {_toml_str(name)}",
        f"target = {_toml_str(target)}",
        f'description = """\n{desc}\n"""',
        f"kernel = {_toml_str(kernel)}",
        f"functions = [{_toml_str(plan.function)}]",
        f"signature = {_toml_str(plan.signature)}",
        'harness = "harness.c"',
        "",
        "[sizes]",
        f"check = {check}",
        f"random = [{lo}, {hi}]",
        f"timing = {timing}",
        f"race = {min(24, timing)}",
        "",
        "[verify]",
        tol,
        *([f"scratch = [{', '.join(_toml_str(x) for x in scratch)}]"] if scratch else []),
        "",
    ])


@dataclass
class Written:
    directory: Path
    plan: Plan
    timing: int
    calibration: list[tuple[int, float]]  # (n, seconds per call) measured


def _measure(task_dir: Path, sizes: list[int], sandbox: object, say: Callable[[str], None],
             choose: Callable[[list[tuple[int, float]]], int | None]) -> list[tuple[int, float]]:
    """Run the baseline at the sizes `choose` picks (one call each, 1 thread) until it returns None."""
    from kernopt.config import EvalConfig
    from kernopt.evaluators.base import Binary
    from kernopt.evaluators.c_family.evaluator import CFamilyEvaluator
    from kernopt.task import Task, load_task

    task = load_task(task_dir)
    assert isinstance(task, Task)
    ev = CFamilyEvaluator(task, sandbox, EvalConfig(), Path(tempfile.mkdtemp(prefix="kernopt-new-")))  # type: ignore[arg-type]
    done: list[tuple[int, float]] = []
    try:
        with ev.session():
            try:
                base = ev.baseline_binary()
            except Exception as e:  # InfraError: the harness or the kernel does not build
                raise TaskError(f"the generated task does not build: {e}") from None
            n = sizes[0]
            while True:
                say(f"timing the baseline at n={n}")
                run, d, r = ev.run_driver(Binary(base, 1, 1, None), [n], [secrets.randbits(62)], True, 60.0, warmup=0, reps=1)
                shutil.rmtree(d, ignore_errors=True)
                if not (r.ok and run.complete) or not run.calls:
                    why = run.error or ("timed out" if r.timed_out else (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1])
                    raise TaskError(f"the baseline fails at n={n}: {why}")
                done.append((n, run.calls[-1].time))
                nxt = choose(done)
                if nxt is None:
                    return done
                n = nxt
    finally:
        ev.close()


def calibrate(task_dir: Path, plan: Plan, sandbox: object, say: Callable[[str], None], target_s: float = 0.5) -> tuple[int, list[tuple[int, float]]]:
    """The timing size: the baseline's call time grown to about target_s (0.2-2 s is the task band) by
    geometric steps, the buffers kept under MAX_BYTES."""
    def fits(n: int) -> bool:
        return buffer_bytes(plan, n) <= MAX_BYTES and buffer_bytes(plan, n, outputs=True) <= MAX_OUT_BYTES

    def choose(done: list[tuple[int, float]]) -> int | None:
        n, t = done[-1]
        if 0.2 <= t <= 2.0 or len(done) >= 25:
            return None
        if t > 2.0:
            smaller = max(1, int(n * 0.5))
            return smaller if smaller not in (m for m, _ in done) else None
        factor = 8.0
        usable = [(m, s) for m, s in done if s > 2e-3]
        if len(usable) >= 2 and usable[-1][0] != usable[-2][0]:
            (n0, t0), (n1, t1) = usable[-2], usable[-1]
            p = math.log(max(t1, 1e-9) / max(t0, 1e-9)) / math.log(n1 / n0)
            if p > 0.3:
                factor = min(64.0, max(1.2, (target_s / t) ** (1.0 / p)))
        elif t > 2e-3:
            factor = min(8.0, max(1.2, target_s / t))  # assume linear until there are two points
        nxt = max(n + 1, int(n * factor))
        if not fits(nxt):
            lo, hi = n, nxt
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if fits(mid) else (lo, mid)
            if lo <= n:
                return None
            nxt = lo
        return nxt

    done = _measure(task_dir, [64], sandbox, say, choose)
    n, t = done[-1]
    if t > 2.0:  # even shrinking did not reach the band: take the last size under 2 s, if any
        under = [(m, s) for m, s in done if s <= 2.0]
        n = max(under)[0] if under else n
    return max(n, max(CHECK_SIZES)), done


def create(name: str, source_path: Path, function: str, out: Path, *, sizes: list[str], params: list[str],
           roles: list[str], fills: list[str], ask: Ask | None, target: str, timing: int | None,
           sandbox: object | None, force: bool = False, say: Callable[[str], None] = lambda _: None) -> Written:
    """Write the task directory (task.toml, the kernel as its baseline, harness.c); calibrate the timing
    size unless given (needs the sandbox)."""
    if not re.fullmatch(r"[A-Za-z0-9_.+-]+", name):
        raise TaskError(f"task name {name!r}: use letters, digits and _ . + -")
    if target not in ("openmp", "c", "mpi", "mpi+openmp"):
        raise TaskError(f"--target {target!r}: task new writes openmp, c, mpi or mpi+openmp tasks")
    try:
        source = source_path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise TaskError(f"{source_path}: cannot read: {e}") from None
    if source_path.suffix != ".c":
        raise TaskError(f"{source_path}: task new reads C kernels (.c)")
    plan = parse_kernel(source, function)
    configure(plan, sizes, params, roles, fills, ask)
    if out.exists() and any(out.iterdir()) and not force:
        raise TaskError(f"{out} exists and is not empty (--force overwrites its task files)")
    out.mkdir(parents=True, exist_ok=True)
    kernel = "kernel.c"
    (out / kernel).write_text(source)
    (out / "harness.c").write_text(harness_source(plan))
    provisional = timing or 64
    (out / "task.toml").write_text(task_toml(name, plan, kernel, target, max(provisional, max(CHECK_SIZES)), source_path.name))
    calibration: list[tuple[int, float]] = []
    if timing is None:
        if sandbox is None:
            raise TaskError("no sandbox to calibrate the timing size in: give --timing N")
        timing, calibration = calibrate(out, plan, sandbox, say)
        (out / "task.toml").write_text(task_toml(name, plan, kernel, target, timing, source_path.name))
    return Written(out, plan, timing, calibration)


def run_new(name: str, source: Path, function: str, out: Path, *, sizes: list[str], params: list[str], roles: list[str],
            fills: list[str], target: str, timing: int | None, ask: Ask | None, force: bool, check: bool,
            sandbox_name: str, say: Callable[[str], None], show: Callable[[str], None]) -> bool:
    """The `kernopt task new` command: write the task, then run `task check` on it. False: the check failed."""
    from kernopt.sandbox import get_sandbox

    sandbox = get_sandbox(sandbox_name, target) if (check or timing is None) else None
    written = create(name, source, function, out, sizes=sizes, params=params, roles=roles, fills=fills, ask=ask,
                     target=target, timing=timing, sandbox=sandbox, force=force, say=say)
    for b in written.plan.buffers.values():
        show(f"buffer {b.name}: {b.role} {b.ctype}[{b.size}]" + (f", filled from [{b.fill[0]}, {b.fill[1]})" if b.fill else ""))
    for s in written.plan.scalars.values():
        show(f"scalar {s.name}: {s.expr or 'drawn from the seed in [0.5, 1.5)'}")
    if written.calibration:
        n, t = written.calibration[-1]
        bigger = int(n * 1.25) + 1
        capped = t < 0.2 and (buffer_bytes(written.plan, bigger) > MAX_BYTES
                              or buffer_bytes(written.plan, bigger, outputs=True) > MAX_OUT_BYTES)
        show(f"timing size {written.timing} (the baseline took {t:.3f} s per call at n={n}"
             + ("; larger sizes pass the buffer caps of task new (1 GiB, outputs 128 MiB): give --timing and, past 4 GiB, "
                "limits.memory_mb in task.toml" if capped else "") + ")")
    show(f"wrote {out}/task.toml, {out}/kernel.c, {out}/harness.c")
    if not check:
        return True
    from kernopt.task import load_task
    from kernopt.task_check import check_task

    checks = check_task(load_task(out), sandbox, progress=say)  # type: ignore[arg-type]
    for c in checks:
        show(f"{'ok  ' if c.ok else ('warn' if c.warning else 'FAIL')} {c.name}: {c.detail}")
    failed = [c for c in checks if not c.ok and not c.warning]
    if failed:
        show(f"task {name} is not valid yet: {failed[0].name}: {failed[0].detail} (edit {out}/task.toml or {out}/harness.c)")
    return not failed
