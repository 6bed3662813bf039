"""The static gate for torch-family solutions: a `solution.py` whose `class ModelNew(nn.Module)` runs
Triton kernels, or CUDA through `torch.utils.cpp_extension.load_inline`.

AST only: the source is never imported or run. It may import only torch, torch.nn(.functional),
triton(.language), math and typing (cuda tasks: also load_inline); every name it reaches through
them is resolved to a dotted path and checked. Rejected: private and dunder attributes, torch's
escape hatches (torch.ops, torch.library, torch.utils, compilers, files, timers, RNG state),
builtins that reach namespaces or run strings (getattr, eval, open, ...; print too: results and
timings come from the runner only, and debug output inside the timed call distorts it), assigning
attributes of anything but `self` (monkeypatching), try/except (no fallbacks), and calling the
reference's own operations (its torch functions, tensor methods, operators on tensors and
nn modules) outside Triton kernels. The runner's dispatch check is the authority on fallbacks; this
one gives an early, precise message. CUDA sources must be literal and pass the C gate's text rules.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
from typing import Any

from kernopt.evaluators.c_family import cuda_gate
from kernopt.evaluators.c_family.static_gate import MAX_SOURCE_BYTES, check_text, strip_comments_and_strings
from kernopt.task import TorchTask

IMPORTS = frozenset({"torch", "torch.nn", "torch.nn.functional", "triton", "triton.language", "triton.language.extra",
                     "triton.language.extra.libdevice", "triton.language.extra.cuda", "triton.language.extra.cuda.libdevice",
                     "math", "typing"})
# Namespaces a dotted path may go through (any other module inside a path is out of reach).
_NAMESPACES = IMPORTS | {"torch.nn.init", "torch.cuda", "torch.linalg", "torch.fft", "torch.special", "torch.autograd", "torch.amp",
                         "torch.cuda.amp", "torch.version", "triton.language.math", "torch.Tensor", "torch.nn.Module",
                         "torch.autograd.Function", "torch.utils", "torch.utils.cpp_extension"}
# Other modules reachable as attributes of those namespaces (torch 2.13, triton 3.9): never a value either.
_MODULE_LEAVES = set("""accelerator anomaly_mode ao attention autocast_mode backcompat backend_registration backends checkpoint collect_env
    common common_types compiler core cpp_backtrace cpu data deterministic distributions dlpack errors forward_ad func function functional
    futures gdc gds grad grad_mode grad_scaler graphs green_contexts hip hooks intrinsic knobs masked memory module modules mps mtia
    nccl nested nvtx optim parallel parameter profiler_legacy profiler_util qat quantizable quantized quantization quasirandom return_types
    runtime sparse standard stdlib_re streams target_info testing throughput_benchmark tools torch torch_version tunable weak windows xpu
    F tl np""".split())
_VALUES = {"torch.Tensor", "torch.nn.Module", "torch.autograd.Function"}  # namespaces that are classes: usable as values
_INLINE = "torch.utils.cpp_extension.load_inline"
_TRITON = {"jit", "autotune", "heuristics", "Config", "cdiv", "next_power_of_2", "language", "constexpr"}
_TYPING = {"Any", "Optional", "Union", "List", "Tuple", "Dict", "Sequence", "Callable", "ClassVar", "Final", "TYPE_CHECKING"}
_TORCH_BANNED = {
    **dict.fromkeys(["ops"], "calls ATen operators directly (a fallback to PyTorch's kernels)"),
    **dict.fromkeys(["library", "overrides"], "registers or intercepts operators"),
    **dict.fromkeys(["utils"], "torch.utils is out of reach (a cuda task may use torch.utils.cpp_extension.load_inline)"),
    **dict.fromkeys(["load", "save", "hub", "serialization", "package", "storage"], "file access"),
    **dict.fromkeys(["compile", "jit", "fx", "export", "compiler"], "PyTorch's own compilers (a fallback to generated kernels)"),
    **dict.fromkeys(["profiler", "Event"], "timer access (timing belongs to the runner)"),
    **dict.fromkeys(["distributed", "multiprocessing"], "processes and networking"),
    **dict.fromkeys(["backends"], "PyTorch's backend settings (precision flags)"),
    **dict.fromkeys(["testing", "classes", "monitor", "cpp"], "not available to solutions"),
    **dict.fromkeys(["CUDAPluggableAllocator", "change_current_allocator"], "loading shared libraries"),
}
# Attribute names refused on anything: other modules reached through torch (torch.os, typing.sys), timers, loaders.
_ANY_BANNED = {**dict.fromkeys(set(sys.stdlib_module_names) - {"math", "select", "trace", "chunk"}, "a module outside the allow-list"),
               **dict.fromkeys(["np", "numpy", "pkgutil", "module_from_spec", "module_finder", "utils"], "a module outside the allow-list"),
               **dict.fromkeys(["elapsed_time", "globaltimer", "Event"], "timer access (timing belongs to the runner)"),
               **dict.fromkeys(["inline_asm_elementwise"], "inline assembly"), "from_file": "file access",
               **dict.fromkeys(["device_print", "static_print"], "printing (results come from the runner only)"),
               **dict.fromkeys(["cudart", "jiterator"], "raw CUDA runtime access"),
               **dict.fromkeys(["fn", "base_fn"], "a Triton kernel's Python function (launch kernels with kernel[grid](...))")}
_BUILTINS = {"open": "file access", **dict.fromkeys(["exec", "eval", "compile"], "running code from strings"),
             **dict.fromkeys(["globals", "locals", "vars", "getattr"], "reaching attributes by name (write the attribute)"),
             **dict.fromkeys(["setattr", "delattr"], "monkeypatching"),
             **dict.fromkeys(["exit", "quit", "breakpoint", "help"], "stopping the runner"),
             "print": "printing (results and timings come from the runner only; remove debug output)"}
_GLUE = {"empty", "emptylike", "emptystrided", "zeros", "zeroslike", "ones", "oneslike", "full", "fulllike", "arange", "newempty",
         "newzeros", "newfull", "view", "viewas", "reshape", "contiguous", "size", "shape", "stride", "numel", "nelement", "dim",
         "ndim", "dtype", "device", "iscontiguous", "dataptr", "elementsize", "unsqueeze", "squeeze", "flatten", "expand", "expandas",
         "t", "transpose", "permute", "movedim", "split", "chunk", "unbind", "narrow", "select", "item", "tolist", "finfo", "iinfo",
         "cdiv", "nextpowerof2", "nograd", "inferencemode", "getdevice", "iscuda", "stream", "currentstream", "synchronize"}
_SYNONYMS = [{"mul", "multiply"}, {"div", "divide", "truedivide"}, {"sub", "subtract", "rsub"}, {"neg", "negative"},
             {"matmul", "mm", "bmm", "addmm", "linear", "einsum", "mv", "baddbmm", "tensordot"}, {"gt", "greater"}, {"lt", "less"},
             {"ge", "greaterequal"}, {"le", "lessequal"}, {"ne", "notequal"}, {"abs", "absolute"}, {"clamp", "clip"},
             {"max", "amax"}, {"min", "amin"}, {"remainder", "fmod"}]
_OPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.FloorDiv: "floordivide", ast.Mod: "remainder",
        ast.Pow: "pow", ast.MatMult: "matmul", ast.BitAnd: "bitwiseand", ast.BitOr: "bitwiseor", ast.BitXor: "bitwisexor",
        ast.USub: "neg", ast.Invert: "bitwisenot", ast.Gt: "gt", ast.Lt: "lt", ast.GtE: "ge", ast.LtE: "le", ast.Eq: "eq", ast.NotEq: "ne"}
_BUILTIN_OPS = {"sum": "add", "abs": "abs", "pow": "pow", "max": "max", "min": "min", "round": "round", "divmod": "floordivide"}
_FINFO = {"max", "min", "eps", "tiny", "bits", "resolution", "smallest_normal"}  # torch.finfo fields, not operations
_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordivide": "//", "remainder": "%", "pow": "**", "matmul": "@", "neg": "-"}
_SCALAR_METHODS = {"numel", "nelement", "size", "stride", "dim", "item", "dataptr", "elementsize", "iscontiguous", "tolist", "getdevice"}
_SCALAR_ATTRS = {"shape", "dtype", "device", "ndim", "iscuda"}
_CONTAINERS = {"Module", "ModuleList", "ModuleDict", "Sequential", "Parameter", "ParameterList", "ParameterDict", "Identity"}
_INLINE_KW = {"name", "cpp_sources", "cuda_sources", "functions", "extra_cflags", "extra_cuda_cflags", "extra_ldflags", "verbose", "with_cuda"}
_INLINE_FLAG = re.compile(r"|-O[0-3]|-std=c\+\+(14|17|20)|-lineinfo|--?use_fast_math|--?maxrregcount=\d{1,3}|-Xptxas=-(v|O[0-3])"
                          r"|--ptxas-options=-v|--extra-device-vectorization|--(ftz|prec-div|prec-sqrt|fmad)=(true|false)|-D[A-Za-z_]\w*(=[\w.+-]*)?")
CUDA_INCLUDES = frozenset({"cuda_runtime.h", "cuda.h", "cuda_fp16.h", "cuda_bf16.h", "cuda_fp8.h", "mma.h", "cooperative_groups.h",
                           "cooperative_groups/reduce.h", "torch/extension.h", "torch/types.h", "ATen/ATen.h", "ATen/cuda/CUDAContext.h",
                           "c10/cuda/CUDAStream.h", "c10/cuda/CUDAGuard.h", "cstdint", "stdint.h", "math.h", "cmath", "cfloat", "float.h",
                           "climits", "limits", "vector", "algorithm"})
_CUDA_WORDS = re.compile(r"(cublas|cublasLt|cudnn|cusparse|cufft|cusolver|curand|nccl|cutlass|blas)\w*|(thread|jthread|async|this_thread"
                         r"|cout|cerr|clog|ifstream|ofstream|fstream|FILE|chrono|clock|clock64|time|__rdtsc|getenv|fprintf|fwrite|freopen|fdopen"
                         r"|read|write|sleep|usleep|nanosleep|mmap|mprotect|dlopen|dlsym|syscall|system|popen|fork|vfork|execve|execv|execvp"
                         r"|execl|execlp|pthread_create|ptrace|setenv|putenv|gettimeofday|clock_gettime|exit|abort|kill|raise|signal|fopen|open"
                         r"|filesystem|unlink|rmdir|rename|remove|chmod|socket|connect"
                         r"|printf|puts|cudaEventElapsedTime|cudaLaunchHostFunc|cudaStreamAddCallback|cudaDeviceReset|cudaSetDevice"
                         r"|cudaProfilerStart|cudaProfilerStop|cu(Event|Ctx|DevicePrimaryCtx|LaunchHostFunc|StreamAddCallback|ModuleLoad"
                         r"|LibraryLoad|Profiler)\w*)")


class _Reject(Exception):
    def __init__(self, node: ast.AST | int, why: str) -> None:
        super().__init__(f"line {node if isinstance(node, int) else getattr(node, 'lineno', 0)}: {why}")


def _norm(name: str) -> str:
    return name.lower().replace("_", "")


def _expand(names: set[str]) -> set[str]:
    return names.union(*(g for g in _SYNONYMS if g & names))


class _Module:
    """A parsed source: parents, import aliases (name -> dotted path) and resolution of dotted chains."""

    def __init__(self, source: str) -> None:
        self.tree = ast.parse(source)
        self.parent: dict[ast.AST, ast.AST] = {c: p for p in ast.walk(self.tree) for c in ast.iter_child_nodes(p)}
        self.alias: dict[str, str] = {}
        self.conflict: tuple[ast.AST, str] | None = None  # a name two imports bind to different things
        for node in ast.walk(self.tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for a in node.names:
                if isinstance(node, ast.Import):
                    name, path = a.asname or a.name.split(".")[0], a.name if a.asname else a.name.split(".")[0]
                elif node.module and a.name != "*":
                    name, path = a.asname or a.name, f"{node.module}.{a.name}"
                else:
                    continue
                if self.alias.setdefault(name, path) != path and self.conflict is None:
                    self.conflict = (node, name)

    def path(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return self.alias.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.path(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    def enclosing(self, node: ast.AST, kinds: type | tuple[type, ...]) -> ast.AST | None:
        while node in self.parent:
            node = self.parent[node]
            if isinstance(node, kinds):
                return node
        return None

    def is_triton(self, fn: ast.AST) -> bool:
        decos = getattr(fn, "decorator_list", [])
        return any((self.path(d.func if isinstance(d, ast.Call) else d) or "").startswith("triton.") for d in decos)

    def in_kernel(self, node: ast.AST) -> bool:
        while node in self.parent:
            node = self.parent[node]
            if isinstance(node, ast.FunctionDef) and self.is_triton(node):
                return True
        return False


def _path_problem(path: str, target: str) -> str | None:
    parts = path.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_"):
            return f"{path} is not allowed: private or dunder attributes are out of reach"
        if target == "cuda" and (_INLINE + ".").startswith(path + "."):
            continue
        if parts[0] == "torch" and (part in _TORCH_BANNED or re.search("seed|rng_state", part)):
            return f"{path} is not allowed: {_TORCH_BANNED.get(part, 'random-number state (inputs are drawn by the runner)')}"
        if i and part in _ANY_BANNED:
            return f"{path} is not allowed: {_ANY_BANNED[part]}"
        if i and i < len(parts) - 1 and ".".join(parts[: i + 1]) not in _NAMESPACES:
            return f"{path} is not allowed: {'.'.join(parts[: i + 1])} is out of reach of solutions"
    if parts[0] == "triton" and len(parts) > 1 and parts[1] not in _TRITON:
        return f"{path} is not allowed: only triton.{', triton.'.join(sorted(_TRITON))} are available"
    if parts[0] == "typing" and len(parts) > 1 and parts[1] not in _TYPING:
        return f"{path} is not allowed: typing offers only {', '.join(sorted(_TYPING))}"
    return None


@functools.lru_cache(maxsize=64)
def _reference_ops(reference: str) -> frozenset[str]:
    """Normalized names of the operations Model (not its __init__) performs, plus the nn modules it builds."""
    try:
        mod = _Module(reference)
    except (SyntaxError, ValueError, RecursionError):
        return frozenset()
    ops: set[str] = set()
    for cls in (n for n in mod.tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"):
        for node in ast.walk(cls):
            leaf = (mod.path(node) or "").rsplit(".", 1)[-1] if isinstance(node, ast.Attribute | ast.Name) else ""
            if (mod.path(node) or "").startswith("torch.nn.") and leaf[:1].isupper() and leaf not in _CONTAINERS:
                ops.add(_norm(leaf))
        for fn in (n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name != "__init__"):
            params = {a.arg for a in fn.args.args[1:]}
            tainted = _taint(mod, fn, params)
            ops |= {op for op, _ in _tensor_ops(mod, fn, params)}
            for node in (n for n in ast.walk(fn) if isinstance(n, ast.Call)):
                fp = mod.path(node.func)
                leaf = (fp or "").rsplit(".", 1)[-1]
                if fp and fp.startswith("torch.") and not fp.startswith("torch.cuda.") and not leaf[:1].isupper():
                    ops.add(_norm(leaf))
                elif fp is None and isinstance(node.func, ast.Attribute) and _tensorish(mod, node.func.value, tainted):
                    ops.add(_norm(node.func.attr))
    return frozenset(ops - _GLUE)


def _tensorish(mod: _Module, e: ast.AST, tainted: set[str]) -> bool:
    if isinstance(e, ast.Name):
        return e.id in tainted
    if isinstance(e, ast.Attribute):
        return e.attr in ("weight", "bias") or (_norm(e.attr) not in _SCALAR_ATTRS and _tensorish(mod, e.value, tainted))
    if isinstance(e, ast.Subscript | ast.Starred):
        return _tensorish(mod, e.value, tainted)
    if isinstance(e, ast.Call):
        p = mod.path(e.func)
        if p is not None:
            return p.startswith("torch.") and _norm(p.rsplit(".", 1)[-1]) not in _SCALAR_METHODS
        return isinstance(e.func, ast.Attribute) and _norm(e.func.attr) not in _SCALAR_METHODS and _tensorish(mod, e.func.value, tainted)
    if isinstance(e, ast.BinOp):
        return _tensorish(mod, e.left, tainted) or _tensorish(mod, e.right, tainted)
    if isinstance(e, ast.UnaryOp):
        return _tensorish(mod, e.operand, tainted)
    if isinstance(e, ast.IfExp):
        return _tensorish(mod, e.body, tainted) or _tensorish(mod, e.orelse, tainted)
    if isinstance(e, ast.List | ast.Tuple):
        return any(_tensorish(mod, x, tainted) for x in e.elts)
    return False


def _taint(mod: _Module, fn: ast.AST, tainted: set[str]) -> set[str]:
    """Names in `fn` that (flow-insensitively, in a few passes over its assignments) may hold tensors."""
    tainted, pairs = set(tainted), list[tuple[ast.AST, ast.AST]]()
    for node in ast.walk(fn):
        pairs += [(t, node.value) for t in node.targets] if isinstance(node, ast.Assign) else \
            [(node.target, node.value)] if isinstance(node, ast.AugAssign | ast.AnnAssign | ast.NamedExpr) and node.value else \
            [(node.target, node.iter)] if isinstance(node, ast.For) else []
    pairs.sort(key=lambda p: (getattr(p[1], "lineno", 0), getattr(p[1], "col_offset", 0)))
    for _ in range(3):
        before = len(tainted)
        for target, value in pairs:
            if _tensorish(mod, value, tainted):
                tainted |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        if len(tainted) == before:
            break
    return tainted


def _tensor_ops(mod: _Module, fn: ast.AST, params: set[str]) -> list[tuple[str, ast.AST]]:
    """(operation, node) for every operator applied to a tensor in `fn`."""
    tainted, out = _taint(mod, fn, params), list[tuple[str, ast.AST]]()
    for node in ast.walk(fn):
        if isinstance(node, ast.BinOp | ast.AugAssign):
            left, right = (node.left, node.right) if isinstance(node, ast.BinOp) else (node.target, node.value)
            if type(node.op) in _OPS and (_tensorish(mod, left, tainted) or _tensorish(mod, right, tainted)):
                out.append((_OPS[type(node.op)], node))
        elif isinstance(node, ast.UnaryOp) and type(node.op) in _OPS and _tensorish(mod, node.operand, tainted):
            out.append((_OPS[type(node.op)], node))
        elif isinstance(node, ast.Compare) and any(_tensorish(mod, e, tainted) for e in [node.left, *node.comparators]):
            out += [(_OPS[type(op)], node) for op in node.ops if type(op) in _OPS]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _BUILTIN_OPS \
                and node.func.id not in mod.alias and any(_tensorish(mod, a, tainted) for a in node.args):
            out.append((_BUILTIN_OPS[node.func.id], node))
    return out


def _strings(mod: _Module, e: ast.AST, depth: int = 0) -> list[tuple[str, int]]:
    """The string(s) an expression denotes: literals, lists/tuples and `+` of them, module-level names bound once."""
    if depth > 20:
        raise _Reject(e, "the CUDA sources are nested too deeply")
    if isinstance(e, ast.Constant) and isinstance(e.value, str):
        return [(e.value, e.lineno)]
    if isinstance(e, ast.JoinedStr):
        raise _Reject(e, "f-strings are not allowed in CUDA sources (they must be readable without running the file)")
    if isinstance(e, ast.List | ast.Tuple):
        return [s for elt in e.elts for s in _strings(mod, elt, depth + 1)]
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
        left, right = _strings(mod, e.left, depth + 1), _strings(mod, e.right, depth + 1)
        if isinstance(e.left, ast.List | ast.Tuple) or len(left) != 1 or len(right) != 1:
            return left + right
        return [(left[0][0] + right[0][0], left[0][1])]
    if isinstance(e, ast.Name):
        binds = [n for n in ast.walk(mod.tree) if isinstance(n, ast.Name) and n.id == e.id and not isinstance(n.ctx, ast.Load)]
        assign = mod.parent.get(binds[0]) if len(binds) == 1 else None
        if isinstance(assign, ast.Assign | ast.AnnAssign) and assign.value is not None and mod.parent.get(assign) is mod.tree:
            return _strings(mod, assign.value, depth + 1)
        raise _Reject(e, f"{e.id} is not a module-level name bound once to a string literal (CUDA sources must be literal)")
    raise _Reject(e, "the CUDA sources cannot be determined statically (use string literals or names bound to them)")


def _inline_calls(mod: _Module) -> list[ast.Call]:
    return [n for n in ast.walk(mod.tree) if isinstance(n, ast.Call) and mod.path(n.func) == _INLINE]


def _inline_sources(mod: _Module, keys: tuple[str, ...]) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for call in _inline_calls(mod):
        args = {**dict(zip(("name", "cpp_sources", "cuda_sources"), call.args, strict=False)), **{k.arg: k.value for k in call.keywords if k.arg}}
        out += [s for key in keys if key in args and not (isinstance(args[key], ast.Constant) and args[key].value is None)  # type: ignore[attr-defined]
                for s in _strings(mod, args[key])]
    return out


def cuda_sources(source: str) -> list[str] | str:
    """The CUDA source strings a solution hands to load_inline(cuda_sources=...), or one line saying why they cannot be known."""
    try:
        return [text for text, _ in _inline_sources(_Module(source), ("cuda_sources",))]
    except (SyntaxError, ValueError, RecursionError) as e:
        return f"solution does not parse: {type(e).__name__}: {e}"
    except _Reject as r:
        return str(r)


def _check_cxx(text: str, banned: set[str]) -> str | None:
    """A C++/CUDA source handed to load_inline: the C gate's text rules, CUDA-specific bans, no reference ops."""
    why = check_text(text, CUDA_INCLUDES)
    if why:
        return why
    code = strip_comments_and_strings(re.sub(r"\\\r?\n", "", text).replace("%:", "#").replace("??=", "#"))
    why = cuda_gate.check_source_rules(code)  # nvcc's reserved names and exit hooks
    if why:
        return why
    if "##" in code or re.search(r"\\[uU][0-9A-Fa-f]", code):
        return "token pasting and universal character names are not allowed in a kernel (they hide names from the gate)"
    for word in re.findall(r"[A-Za-z_]\w*", code):
        if _CUDA_WORDS.fullmatch(word):
            return f"uses {word}: libraries, host threads, timers, files, printing and process control are not allowed in a CUDA source"
    m = re.search(r"\b(?:at|torch|c10)\s*::\s*(?:\w+\s*::\s*)*(native|_ops|blas|load|save|pickle_load|pickle_save|from_file)\b", code)
    if m:
        return f"uses {m.group(0)}: ATen internals (they bypass the dispatcher) and file access are not allowed in a CUDA source"
    for m in re.finditer(r"\b(?:torch|at)\s*::\s*(?:\w+\s*::\s*)*(\w+)\s*\(|(?:\.|->)\s*(\w+)\s*\(", code):
        name = m.group(1) or m.group(2)
        if _norm(name) in banned:
            return f"calls {name}(), the reference's own operation: compute it in the kernel"
    return None


def check_python_source(task: TorchTask, source: str) -> str | None:
    """None if the solution may run, else one line saying why it is rejected."""
    if len(source.encode()) > MAX_SOURCE_BYTES:
        return f"{task.kernel} is larger than {MAX_SOURCE_BYTES // 1024} KiB"
    try:
        mod = _Module(source)
    except SyntaxError as e:
        return f"{task.kernel} does not parse: line {e.lineno}: {e.msg}"
    except (ValueError, RecursionError, MemoryError) as e:
        return f"{task.kernel} does not parse: {type(e).__name__}"
    try:
        _check(task, mod)
    except _Reject as r:
        return f"{task.kernel} {r}"
    except RecursionError:
        return f"{task.kernel} nests expressions too deeply to be checked"
    return None


def _check(task: TorchTask, mod: _Module) -> None:
    try:
        ref = task.reference_source()
    except OSError:
        ref = ""
    allowed = _expand({_norm(op.split(".")[1] if op.startswith("aten.") else op) for op in task.verify.allow_torch_ops})
    banned = _expand(set(_reference_ops(ref))) - allowed - _GLUE
    classes = {n.name: {f.name for f in n.body if isinstance(f, ast.FunctionDef)} for n in ast.walk(mod.tree) if isinstance(n, ast.ClassDef)}
    methods = set().union(*classes.values()) if classes else set()
    own = methods | {n.attr for n in ast.walk(mod.tree) if isinstance(n, ast.Attribute) and not isinstance(n.ctx, ast.Load)
                     and isinstance(n.value, ast.Name) and n.value.id == "self"}
    if mod.conflict:
        raise _Reject(mod.conflict[0], f"{mod.conflict[1]} is imported as two different things")
    for node in ast.walk(mod.tree):
        line = node
        if isinstance(node, ast.arg) and node.arg in mod.alias:
            raise _Reject(line, f"parameter {node.arg} shadows the imported name {node.arg}")
        if isinstance(node, ast.Import | ast.ImportFrom):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or "."]
            for m in mods:
                if m == "reference" or m.startswith("reference."):
                    raise _Reject(line, "importing the reference is not allowed: ModelNew must compute the result itself")
                if isinstance(node, ast.ImportFrom) and m == "__future__":
                    continue
                if node.__class__ is ast.ImportFrom and (node.level or any(a.name == "*" for a in node.names)):
                    raise _Reject(line, "relative and star imports are not allowed")
                ok = IMPORTS | ({"torch.utils.cpp_extension"} if task.target == "cuda" else set())
                if m not in ok and (m not in _NAMESPACES or m.startswith("torch.utils")):
                    raise _Reject(line, f"import {m} is not allowed (solutions may import {', '.join(sorted(ok))})")
            for a in node.names if isinstance(node, ast.ImportFrom) and node.module != "__future__" else []:
                why = _path_problem(f"{getattr(node, 'module', '')}.{a.name}", task.target)
                if why:
                    raise _Reject(line, why)
        elif isinstance(node, ast.Try | ast.TryStar):
            raise _Reject(line, "try/except is not allowed (no fallbacks: a kernel that fails must fail)")
        elif isinstance(node, ast.Global | ast.Nonlocal) and set(node.names) & set(mod.alias):
            raise _Reject(line, f"rebinding the imported name {sorted(set(node.names) & set(mod.alias))[0]} is not allowed")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name.startswith("__") and node.name != "__init__":
                raise _Reject(line, f"defining {node.name} is not allowed (special methods can intercept the runner or hide failures)")
            if node.name in mod.alias or (node.name == "ModelNew" and mod.parent.get(node) is not mod.tree):
                raise _Reject(line, f"rebinding {node.name} is not allowed")
        elif isinstance(node, ast.Name):
            if node.id.startswith("__") and node.id != "__name__":
                raise _Reject(line, f"{node.id} is not allowed: dunder names are out of reach")
            if isinstance(node.ctx, ast.Load) and node.id in _BUILTINS and node.id not in mod.alias:
                raise _Reject(line, f"{node.id}() is not allowed: {_BUILTINS[node.id]}")
            if not isinstance(node.ctx, ast.Load) and (node.id in mod.alias or node.id in ("self", "ModelNew")):
                raise _Reject(line, f"rebinding {node.id} is not allowed")
        if isinstance(node, ast.Attribute):
            _check_attribute(mod, node, classes, methods, own)
        if isinstance(node, ast.Name | ast.Attribute) and not isinstance(mod.parent.get(node), ast.Attribute):
            _check_chain(task, mod, node, banned)
        if isinstance(node, ast.Call) and mod.path(node.func) == _INLINE:
            _check_load_inline(node)
    main = [n for n in mod.tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"]
    if not main:
        raise _Reject(1, "no class ModelNew at module level (it must subclass nn.Module like the reference's Model)")
    if len(main) > 1:
        raise _Reject(main[1], "class ModelNew is defined more than once")
    if "forward" not in classes["ModelNew"]:
        raise _Reject(main[0], "class ModelNew has no forward method")
    _check_fallbacks(mod, main[0], banned)
    if task.target == "cuda":
        for text, lineno in _inline_sources(mod, ("cpp_sources", "cuda_sources")):
            why = _check_cxx(text, banned)
            if why:
                raise _Reject(lineno, f"(C++/CUDA source) {why}")


def _check_attribute(mod: _Module, node: ast.Attribute, classes: dict, methods: set[str], own: set[str]) -> None:
    root = node.value
    while isinstance(root, ast.Attribute | ast.Subscript):
        root = root.value
    is_super = isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name) and node.value.func.id == "super"
    if node.attr.startswith("__") and not (node.attr == "__init__" and is_super):
        raise _Reject(node, f".{node.attr} is not allowed: dunder attributes are out of reach")
    on_self = isinstance(node.value, ast.Name) and node.value.id == "self"
    if node.attr.startswith("_") and not is_super and not (on_self and node.attr in own):
        raise _Reject(node, f".{node.attr} is not allowed: private attributes are out of reach (except self's own, set in this file)")
    if node.attr in _ANY_BANNED and mod.path(node) is None:
        raise _Reject(node, f".{node.attr} is not allowed: {_ANY_BANNED[node.attr]}")
    if isinstance(node.value, ast.Name) and node.value.id in classes and node.attr in methods:
        raise _Reject(node, f"{node.value.id}.{node.attr}: calling methods through the class is not allowed")
    if not isinstance(node.ctx, ast.Load):
        fn: Any = mod.enclosing(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        while fn is not None and "self" not in {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}:
            fn = mod.enclosing(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        method = fn is not None and isinstance(mod.parent.get(fn), ast.ClassDef) and fn.args.args[:1] and fn.args.args[0].arg == "self" \
            and not any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list)
        if not (isinstance(root, ast.Name) and root.id == "self" and method):
            raise _Reject(node, f"assigning {ast.unparse(node)} is not allowed: only attributes of self may be set (no monkeypatching)")


def _check_chain(task: TorchTask, mod: _Module, node: ast.Name | ast.Attribute, banned: set[str]) -> None:
    """A maximal dotted chain rooted at an imported name."""
    path = mod.path(node)
    if path is None:
        return
    why = _path_problem(path, task.target)
    if why:
        raise _Reject(node, why)
    parent = mod.parent.get(node)
    if path in _NAMESPACES - _VALUES or (path.count(".") and path.rsplit(".", 1)[-1] in _MODULE_LEAVES):
        raise _Reject(node, f"using the module {path} as a value is not allowed (write {path}.<name>)")
    if path.startswith(_INLINE) and task.target != "cuda":
        raise _Reject(node, "load_inline is for cuda tasks only")
    leaf = path.rsplit(".", 1)[-1]
    if not path.startswith("torch.") or _norm(leaf) not in banned:  # kernels included: `kernel.fn` is banned, torch has no place there
        return
    if leaf[:1].isupper():  # an nn module of a kind the reference uses: only built into self.<attr>, never called
        call = parent if isinstance(parent, ast.Call) and parent.func is node else None
        while call is not None and isinstance(mod.parent.get(call), ast.Call | ast.List | ast.Tuple | ast.keyword):
            call = mod.parent[call]  # type: ignore[assignment]
        target = mod.parent.get(call) if call is not None else None
        if isinstance(target, ast.Assign) and all(isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
                                                  for t in target.targets):
            return
        raise _Reject(node, f"{path} is the reference's own operation: it may only be built into self.<attr> for its parameters")
    raise _Reject(node, f"{path} is the reference's own operation: compute it in a kernel, not with PyTorch (no fallbacks)")


def _check_load_inline(call: ast.Call) -> None:
    if len(call.args) > 3 or any(k.arg is None for k in call.keywords):
        raise _Reject(call, "pass load_inline's options by keyword")
    for k in call.keywords:
        if k.arg not in _INLINE_KW:
            raise _Reject(k.value, f"load_inline({k.arg}=...) is not allowed (allowed: {', '.join(sorted(_INLINE_KW))})")
        if k.arg.startswith("extra_"):  # link flags: none (KernelBench writes extra_ldflags=[""])
            flags = k.value.elts if isinstance(k.value, ast.List | ast.Tuple) else [k.value]
            for f in flags:
                ok = isinstance(f, ast.Constant) and isinstance(f.value, str) and _INLINE_FLAG.fullmatch(f.value)
                if not ok or (k.arg == "extra_ldflags" and f.value):  # type: ignore[attr-defined]
                    raise _Reject(f, f"load_inline flag {ast.unparse(f)} is not allowed in {k.arg} (optimization flags only)")
    name = next((k.value for k in call.keywords if k.arg == "name"), call.args[0] if call.args else None)
    if not (isinstance(name, ast.Constant) and isinstance(name.value, str) and name.value.isidentifier()):
        raise _Reject(call, "load_inline's name must be a string literal that is an identifier")


def _check_fallbacks(mod: _Module, main: ast.ClassDef, banned: set[str]) -> None:
    """Outside Triton kernels: no tensor methods or operators of the reference's, no calls of reference-kind submodules."""
    if not banned:
        return
    ext = {t.id for n in ast.walk(mod.tree) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and mod.path(n.value.func) == _INLINE
           for t in n.targets if isinstance(t, ast.Name)}  # extension modules: their functions are the candidate's own
    ext |= {t.attr for n in ast.walk(main) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Name) and n.value.id in ext
            for t in n.targets if isinstance(t, ast.Attribute)}
    for node in ast.walk(mod.tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and mod.path(node.func) is None and not mod.in_kernel(node):
            base = node.func.value
            own = (isinstance(base, ast.Name) and base.id in ext) or (isinstance(base, ast.Attribute) and base.attr in ext)
            if _norm(node.func.attr) in banned and not own:
                raise _Reject(node, f".{node.func.attr}() is the reference's own operation: compute it in a kernel (no fallbacks)")
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and _norm(node.attr) in banned and node.attr not in _FINFO \
                and mod.path(node) is None and not isinstance(node.value, ast.Call) and not mod.in_kernel(node) \
                and not (isinstance(mod.parent.get(node), ast.Call) and mod.parent[node].func is node):  # type: ignore[attr-defined]
            raise _Reject(node, f".{node.attr} is the reference's own operation: compute it in a kernel (no fallbacks)")
    submodules = {t.attr for n in ast.walk(main) if isinstance(n, ast.Assign) for t in n.targets
                  if isinstance(t, ast.Attribute) and any(_norm(leaf) in banned and leaf[:1].isupper() for c in ast.walk(n.value)
                                                          if isinstance(c, ast.Call) for leaf in [(mod.path(c.func) or "").rsplit(".", 1)[-1]])}
    for node in ast.walk(main):
        if isinstance(node, ast.Attribute) and node.attr in submodules and isinstance(node.value, ast.Name) and node.value.id == "self" \
                and isinstance(node.ctx, ast.Load):
            use: ast.AST = node
            while isinstance(mod.parent.get(use), ast.Subscript) and mod.parent[use].value is use:  # type: ignore[attr-defined]
                use = mod.parent[use]
            parent = mod.parent.get(use)
            if not (isinstance(parent, ast.Attribute) and parent.attr != "forward"):
                raise _Reject(node, f"self.{node.attr} is a module of a kind the reference uses: use its parameters, do not call it")
    # operators on tensors, from forward through the functions it hands tensors to
    funcs: dict[str, Any] = {f.name: f for f in ast.walk(mod.tree) if isinstance(f, ast.FunctionDef) and not mod.is_triton(f)}
    funcs |= {t.id: n.value for n in ast.walk(mod.tree) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Lambda)
              for t in n.targets if isinstance(t, ast.Name)}
    forward = next(f for f in main.body if isinstance(f, ast.FunctionDef) and f.name == "forward")
    todo: list[tuple[Any, frozenset[str]]] = [(forward, frozenset(a.arg for a in forward.args.args[1:] if _tensor_arg(a)))]
    seen: set[tuple[int, frozenset[str]]] = set()
    while todo and len(seen) < 100:  # bounded: the runner's dispatch check is the authority
        fn, params = todo.pop()
        if (id(fn), params) in seen:
            continue
        seen.add((id(fn), params))
        for op, node in _tensor_ops(mod, fn, set(params)):
            if op in banned and not mod.in_kernel(node):
                what = f"{node.func.id}()" if isinstance(node, ast.Call) else f"`{_SYMBOL.get(op, op)}`"  # type: ignore[attr-defined]
                raise _Reject(node, f"{what} on tensors is the reference's own operation ({op}): compute it in a kernel")
        tainted = _taint(mod, fn, set(params))
        for call in (n for n in ast.walk(fn) if isinstance(n, ast.Call)):
            f = call.func
            on_self = isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self"
            name = f.id if isinstance(f, ast.Name) else f.attr if on_self else None  # type: ignore[attr-defined]
            callee = funcs.get(name or "")
            if callee is None or callee is fn:
                continue
            names = [a.arg for a in callee.args.args][1 if isinstance(f, ast.Attribute) else 0:]
            hot = {names[i] for i, a in enumerate(call.args) if i < len(names) and _tensorish(mod, a, tainted)}
            hot |= {k.arg for k in call.keywords if k.arg in names and _tensorish(mod, k.value, tainted)}
            todo.append((callee, frozenset(hot)))


def _tensor_arg(a: ast.arg) -> bool:
    return not (isinstance(a.annotation, ast.Name) and a.annotation.id in ("int", "float", "bool", "str"))
