"""The Python static gate (kernopt/evaluators/torch_family/py_gate.py): each rule with a minimal rejected source and
the part of the message that names it, adversarial bypass attempts, and controls that must pass.
Nothing here imports or runs a solution."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from kernopt.evaluators.c_family.static_gate import MAX_SOURCE_BYTES
from kernopt.evaluators.torch_family.py_gate import CUDA_INCLUDES, check_python_source, cuda_sources
from kernopt.task import TorchTask, load_task

REPO = Path(__file__).resolve().parent.parent
HACKS = Path(__file__).resolve().parent / "hacks_gpu"


def torch_task(path: Path) -> TorchTask:
    task = load_task(path)
    assert isinstance(task, TorchTask)
    return task


ADD = torch_task(REPO / "tasks" / "triton" / "vector_add")
SOFTMAX = torch_task(REPO / "tests" / "data" / "softmax_rows")
CUDA_ADD = torch_task(REPO / "tests" / "data" / "cuda_vector_add")

HEADER = "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n"
ADD_KERNEL = '''
@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(a_ptr + offs, mask=mask) + tl.load(b_ptr + offs, mask=mask), mask=mask)
'''
LAUNCH = "out = torch.empty_like(a)\nn = a.numel()\nadd_kernel[(triton.cdiv(n, 128),)](a, b, out, n, BLOCK=128)\nreturn out"


def add_src(body: str = LAUNCH, prelude: str = "", header: str = HEADER, init: str = "", extra: str = "") -> str:
    """A vector_add solution with the given forward body, module-level prelude, __init__ additions, class extras."""
    init_body = textwrap.indent("super().__init__()\n" + textwrap.dedent(init), " " * 8)
    return (f"{header}{textwrap.dedent(prelude)}\n{ADD_KERNEL}\n\nclass ModelNew(nn.Module):\n    def __init__(self):\n{init_body}\n"
            f"    def forward(self, a, b):\n{textwrap.indent(textwrap.dedent(body), ' ' * 8)}\n{textwrap.indent(textwrap.dedent(extra), '    ')}\n")


SM_KERNEL = '''
@triton.jit
def sm_kernel(x_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    v = tl.load(x_ptr + row * cols + offs, mask=offs < cols, other=-float("inf"))
    e = tl.exp(v - tl.max(v, axis=0))
    tl.store(out_ptr + row * cols + offs, e / tl.sum(e, axis=0), mask=offs < cols)
'''
SM_LAUNCH = "out = torch.empty_like(x)\nsm_kernel[(x.shape[0],)](x, out, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))\nreturn out"


def sm_src(body: str = SM_LAUNCH, prelude: str = "", header: str = HEADER, init: str = "") -> str:
    init_body = textwrap.indent("super().__init__()\n" + textwrap.dedent(init), " " * 8)
    return (f"{header}{textwrap.dedent(prelude)}\n{SM_KERNEL}\n\nclass ModelNew(nn.Module):\n    def __init__(self):\n{init_body}\n"
            f"    def forward(self, x):\n{textwrap.indent(textwrap.dedent(body), ' ' * 8)}\n")


def cuda_src(cuda: str = "", cpp: str = '"torch::Tensor add(torch::Tensor a, torch::Tensor b);"', options: str = "", prelude: str = "") -> str:
    kernel = cuda or ('r"""\n#include <torch/extension.h>\n__global__ void k(const float *a, const float *b, float *o, long n) {\n'
                      '    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;\n    if (i < n) o[i] = a[i] + b[i];\n}\n'
                      'torch::Tensor add(torch::Tensor a, torch::Tensor b) {\n    auto o = torch::empty_like(a);\n'
                      '    k<<<(a.numel() + 255) / 256, 256>>>(a.data_ptr<float>(), b.data_ptr<float>(), o.data_ptr<float>(), a.numel());\n'
                      '    return o;\n}\n"""')
    return (f"import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n{textwrap.dedent(prelude)}\n"
            f"SRC = {kernel}\n\next = load_inline(name='k_add', cpp_sources={cpp}, cuda_sources=SRC, functions=['add']{options})\n\n\n"
            "class ModelNew(nn.Module):\n    def forward(self, a, b):\n        return ext.add(a, b)\n")


# KernelBench's own load_inline example, as models learn to write it (functions named like the op, empty flag lists)
KERNELBENCH_CUDA = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

elementwise_add_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void elementwise_add_kernel(const float* a, const float* b, float* out, int size) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < size) {
        out[idx] = a[idx] + b[idx];
    }
}

torch::Tensor add(torch::Tensor a, torch::Tensor b) {
    auto size = a.numel();
    auto out = torch::zeros_like(a);
    const int block_size = 256;
    const int num_blocks = (size + block_size - 1) / block_size;
    elementwise_add_kernel<<<num_blocks, block_size>>>(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), size);
    return out;
}
"""

elementwise_add_cpp_source = "torch::Tensor add(torch::Tensor a, torch::Tensor b);"

elementwise_add = load_inline(
    name="elementwise_add",
    cpp_sources=elementwise_add_cpp_source,
    cuda_sources=elementwise_add_source,
    functions=["add"],
    verbose=True,
    extra_cflags=[""],
    extra_ldflags=[""],
)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.elementwise_add = elementwise_add

    def forward(self, a, b):
        return self.elementwise_add.add(a, b)
'''


def check(task: TorchTask, source: str) -> str | None:
    return check_python_source(task, source)


# ---------------------------------------------------------------- controls
TORCH_TASKS = sorted(p.parent for p in [*(REPO / "tasks").glob("*/*/task.toml"), *(REPO / "tests" / "data").glob("*/task.toml")]
                     if re.search(r'(?m)^target = "(triton|cuda)"', p.read_text()))


@pytest.mark.parametrize("task_dir", TORCH_TASKS, ids=[str(d.relative_to(REPO)) for d in TORCH_TASKS])
def test_every_torch_family_starting_kernel_passes(task_dir: Path) -> None:
    task = torch_task(task_dir)
    assert check(task, task.baseline_source()) is None


GEMM_LRELU = TorchTask(name="gemm_lrelu", target="triton", description="KernelBench level 2, problem 12",
                       root=REPO / "tests" / "data" / "kernelbench", reference="12_Gemm_Multiply_LeakyReLU.py",
                       shapes={"vars": ["batch_size"], "check": [{"batch_size": 3}]})
GEMM_KERNEL = """
@triton.jit
def fused(x_ptr, w_ptr, b_ptr, out_ptr, M, N, K, mult, slope, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        x = tl.load(x_ptr + row * K + ks, mask=ks < K, other=0.0)
        w = tl.load(w_ptr + cols[:, None] * K + ks[None, :], mask=(cols[:, None] < N) & (ks[None, :] < K), other=0.0)
        acc += tl.sum(w * x[None, :], axis=1)
    y = (acc + tl.load(b_ptr + cols, mask=cols < N, other=0.0)) * mult
    tl.store(out_ptr + row * N + cols, tl.where(y > 0, y, y * slope), mask=cols < N)
"""


def gemm_src(body: str) -> str:
    return (HEADER + "import torch.nn.functional as F\n" + GEMM_KERNEL + "\n\nclass ModelNew(nn.Module):\n"
            "    def __init__(self, in_features, out_features, multiplier, negative_slope):\n        super().__init__()\n"
            "        self.gemm = nn.Linear(in_features, out_features)\n        self.leaky_relu = nn.LeakyReLU(negative_slope)\n"
            "        self.multiplier, self.negative_slope = multiplier, negative_slope\n\n    def forward(self, x):\n"
            + textwrap.indent(textwrap.dedent(body), " " * 8) + "\n")


GEMM_LAUNCH = """x = x.contiguous()
M, K = x.shape
N = self.gemm.weight.shape[0]
out = torch.empty((M, N), device=x.device, dtype=x.dtype)
fused[(M, triton.cdiv(N, 64))](x, self.gemm.weight, self.gemm.bias, out, M, N, K, self.multiplier, self.negative_slope, BLOCK_N=64, BLOCK_K=64)
return out"""


@pytest.mark.parametrize("body,fragment", [
    (GEMM_LAUNCH, None),
    ("x = self.gemm(x)\n" + GEMM_LAUNCH, "self.gemm is a module of a kind the reference uses"),
    ("y = F.linear(x, self.gemm.weight, self.gemm.bias)\n" + GEMM_LAUNCH, "torch.nn.functional.linear is the reference's own operation"),
    ("y = x @ self.gemm.weight.t()\n" + GEMM_LAUNCH, "`@` on tensors"),
    ("y = torch.mm(x, self.gemm.weight.t())\n" + GEMM_LAUNCH, "torch.mm is the reference's own operation"),
    ("y = self.leaky_relu(x)\n" + GEMM_LAUNCH, ".leaky_relu() is the reference's own operation"),
    ("y = x * self.multiplier\n" + GEMM_LAUNCH, "`*` on tensors"),
    ("y = F.leaky_relu(x, 0.1)\n" + GEMM_LAUNCH, "leaky_relu is the reference's own operation"),
], ids=["kernel", "call_linear", "F_linear", "matmul_operator", "torch_mm", "call_lrelu", "mul_operator", "F_leaky_relu"])
def test_kernelbench_modules_keep_parameters_but_are_never_called(body: str, fragment: str | None) -> None:
    why = check(GEMM_LRELU, gemm_src(body))
    assert why is None if fragment is None else fragment in (why or "accepted"), why


def test_controls_pass() -> None:
    assert check(ADD, add_src()) is None
    assert check(SOFTMAX, (HACKS / "control_softmax_online.py").read_text()) is None
    assert check(SOFTMAX, sm_src()) is None
    assert check(CUDA_ADD, CUDA_ADD.baseline_source()) is None
    assert check(CUDA_ADD, cuda_src()) is None
    assert check(CUDA_ADD, KERNELBENCH_CUDA) is None
    for name in ("control_naive.py", "control_optimized.py"):
        assert check(ADD, (HACKS / name).read_text()) is None, name


@pytest.mark.parametrize("source", [
    add_src(header=HEADER + "import math\nfrom typing import Optional\nfrom triton.language.extra import libdevice\n"
            "import torch.nn.functional as F\nfrom torch import nn as tnn\n", prelude="SCALE = math.sqrt(2.0)\n"),
    add_src(body="s = torch.cuda.Stream()\nwith torch.cuda.stream(s):\n    out = torch.empty_like(a)\n"
                 "    add_kernel[(triton.cdiv(a.numel(), 128),)](a, b, out, a.numel(), BLOCK=128)\n"
                 "torch.cuda.current_stream().wait_stream(s)\nreturn out"),
    add_src(init="self._calls = 0\nself.block: Optional[int] = 128", header=HEADER + "from typing import Optional\n",
            body="self._calls += 1\n" + LAUNCH.replace("128)", "self.block)")),
    add_src(body="if a.numel() == 0:\n    raise ValueError('empty input')\nassert a.is_contiguous()\n" + LAUNCH),
    add_src(body="def grid(meta):\n    return (triton.cdiv(a.numel(), meta['BLOCK']),)\nout = torch.empty_like(a)\n"
                 "add_kernel[grid](a, b, out, a.numel(), BLOCK=256)\nreturn out.view(-1).reshape(a.shape)"),
    add_src(body=LAUNCH, extra="def extra_repr(self) -> str:\n    return 'add'\n"),
    add_src(body=LAUNCH, prelude="if __name__ == '__main__':\n    pass\n"),
    add_src(init="self.graph = None\nself.static = None", body="if self.graph is None:\n    self.static = torch.empty_like(a)\n"
                 "    self.graph = torch.cuda.CUDAGraph()\n    with torch.cuda.graph(self.graph):\n"
                 "        add_kernel[(triton.cdiv(a.numel(), 128),)](a, b, self.static, a.numel(), BLOCK=128)\n"
                 "self.graph.replay()\nreturn self.static"),
], ids=["imports", "streams", "private_self", "raise_assert", "grid_fn", "methods", "main_guard", "cuda_graph"])
def test_harmless_solutions_pass(source: str) -> None:
    assert check(ADD, source) is None


def test_allowed_torch_ops_are_allowed() -> None:
    fallback = sm_src(body="return torch.softmax(x, dim=1)")
    assert "reference's own operation" in (check(SOFTMAX, fallback) or "")
    allowed = SOFTMAX.model_copy(update={"verify": SOFTMAX.verify.model_copy(update={"allow_torch_ops": ["aten.softmax"]})})
    assert check(allowed, fallback) is None


# ---------------------------------------------------------------- rules: (task, source, fragment)
REJECTED = [
    # shape of the file
    ("size", ADD, "x = 1\n" * (MAX_SOURCE_BYTES // 6 + 1), "larger than 256 KiB"),
    ("syntax", ADD, add_src(body="return (a +"), "does not parse: line"),
    ("null_byte", ADD, add_src() + "\0", "does not parse"),
    ("no_model_new", ADD, HEADER + ADD_KERNEL, "no class ModelNew"),
    ("no_forward", ADD, HEADER + "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n", "has no forward"),
    ("twice", ADD, add_src() + "\nclass ModelNew(nn.Module):\n    def forward(self, a, b):\n        return a\n", "defined more than once"),
    ("rebind_model_new", ADD, add_src() + "\nModelNew = nn.Identity\n", "rebinding ModelNew"),
    # imports
    ("import_os", ADD, add_src(header=HEADER + "import os\n"), "import os is not allowed"),
    ("import_reference", ADD, add_src(header=HEADER + "import reference\n"), "importing the reference is not allowed"),
    ("from_reference", ADD, add_src(header=HEADER + "from reference import Model\n"), "importing the reference"),
    ("import_functools", ADD, add_src(header=HEADER + "import functools\n"), "import functools is not allowed"),
    ("import_numpy", ADD, add_src(header=HEADER + "import numpy as np\n"), "import numpy is not allowed"),
    ("import_dynamo", ADD, add_src(header=HEADER + "import torch._dynamo\n"), "import torch._dynamo is not allowed"),
    ("from_torch_C", ADD, add_src(header=HEADER + "from torch import _C\n"), "private or dunder"),
    ("star_import", ADD, add_src(header=HEADER + "from torch import *\n"), "star imports"),
    ("relative_import", ADD, add_src(header=HEADER + "from . import helper\n"), "relative"),
    ("load_inline_in_triton_task", ADD, add_src(header=HEADER + "from torch.utils.cpp_extension import load_inline\n"),
     "import torch.utils.cpp_extension is not allowed"),
    ("torch_utils_attr", ADD, add_src(header=HEADER + "import torch.utils\n", body="torch.utils.cpp_extension.load('x', ['y'])\n" + LAUNCH),
     "not allowed"),
    # builtins
    ("open", ADD, add_src(body="open('expected.npy').read()\n" + LAUNCH), "open() is not allowed: file access"),
    ("exec", ADD, add_src(body="exec('out = a + b')\n" + LAUNCH), "exec() is not allowed"),
    ("eval", ADD, add_src(body="return eval('a + b')"), "eval() is not allowed"),
    ("compile", ADD, add_src(body="compile('1', 'x', 'eval')\n" + LAUNCH), "compile() is not allowed"),
    ("dunder_import", ADD, add_src(body="__import__('os').system('true')\n" + LAUNCH), "__import__ is not allowed"),
    ("globals", ADD, add_src(body="globals()['torch']\n" + LAUNCH), "globals() is not allowed"),
    ("vars", ADD, add_src(body="vars(a)\n" + LAUNCH), "vars() is not allowed"),
    ("getattr", ADD, add_src(body="getattr(a, 'add')(b)\n" + LAUNCH), "getattr() is not allowed"),
    ("setattr", ADD, add_src(body="setattr(torch.cuda, 'synchronize', None)\n" + LAUNCH), "setattr() is not allowed"),
    ("delattr", ADD, add_src(body="delattr(self, 'x')\n" + LAUNCH), "delattr() is not allowed"),
    ("breakpoint", ADD, add_src(body="breakpoint()\n" + LAUNCH), "breakpoint() is not allowed"),
    ("print", ADD, add_src(body="print('speedup 100x')\n" + LAUNCH), "print() is not allowed: printing"),
    ("exit", ADD, add_src(body="exit(0)\n" + LAUNCH), "exit() is not allowed"),
    ("builtin_alias", ADD, add_src(prelude="g = getattr\n"), "getattr() is not allowed"),
    # dunders and private attributes
    ("builtins_name", ADD, add_src(body="__builtins__['print']('x')\n" + LAUNCH), "__builtins__ is not allowed"),
    ("dunder_dict", ADD, add_src(body="torch.nn.functional.__dict__['relu']\n" + LAUNCH), "not allowed"),
    ("dunder_class", ADD, add_src(body="a.__class__\n" + LAUNCH), ".__class__ is not allowed: dunder"),
    ("dunder_globals", ADD, add_src(body="add_kernel.fn.__globals__\n" + LAUNCH), ".__globals__ is not allowed"),
    ("dunder_code", ADD, add_src(body="self.forward.__code__\n" + LAUNCH), ".__code__ is not allowed"),
    ("subclasses", ADD, add_src(body="object.__subclasses__()\n" + LAUNCH), ".__subclasses__ is not allowed"),
    ("self_setattr", ADD, add_src(body="self.__setattr__('x', 1)\n" + LAUNCH), ".__setattr__ is not allowed"),
    ("torch_C", ADD, add_src(body="torch._C._cuda_synchronize()\n" + LAUNCH), "._cuda_synchronize is not allowed: private"),
    ("private_other", ADD, add_src(body="a._base\n" + LAUNCH), "._base is not allowed: private"),
    ("kernel_private", ADD, add_src(body="add_kernel._init_handles()\n" + LAUNCH), "._init_handles is not allowed"),
    ("dunder_def", ADD, add_src(extra="def __exit__(self, *exc):\n    return True\n"), "defining __exit__ is not allowed"),
    ("module_getattr", ADD, add_src(prelude="def __getattr__(name):\n    return None\n"), "defining __getattr__"),
    ("torch_dispatch", ADD, add_src(prelude="class T(torch.Tensor):\n    @classmethod\n    def __torch_dispatch__(cls, f, t, a=(), k=None):\n"
                                             "        return f(*a)\n"), "defining __torch_dispatch__"),
    # torch escape hatches
    ("torch_ops", ADD, add_src(body="return torch.ops.aten.add.Tensor(a, b)"), "torch.ops.aten.add.Tensor is not allowed: calls ATen"),
    ("torch_library", ADD, add_src(body="torch.library.Library('aten', 'IMPL')\n" + LAUNCH), "registers or intercepts"),
    ("torch_load", ADD, add_src(body="return torch.load('expected.pt')"), "file access"),
    ("from_file", ADD, add_src(body="torch.UntypedStorage.from_file('x')\n" + LAUNCH), "not allowed"),
    ("torch_compile", ADD, add_src(prelude="f = torch.compile(lambda x, y: x + y)\n"), "PyTorch's own compilers"),
    ("torch_jit", ADD, add_src(prelude="@torch.jit.script\ndef f(x):\n    return x\n"), "PyTorch's own compilers"),
    ("manual_seed", ADD, add_src(body="torch.manual_seed(0)\n" + LAUNCH), "random-number state"),
    ("initial_seed", ADD, add_src(body="s = torch.initial_seed()\n" + LAUNCH), "random-number state"),
    ("backends_tf32", ADD, add_src(body="x = torch.backends.cuda.matmul.allow_tf32\n" + LAUNCH), "backend settings"),
    ("torch_os", ADD, add_src(body="torch.os.system('true')\n" + LAUNCH), "torch.os.system is not allowed: a module outside"),
    ("typing_sys", ADD, add_src(header=HEADER + "import typing\n", body="typing.sys.exit(0)\n" + LAUNCH), "module outside the allow-list"),
    ("typing_eval", ADD, add_src(header=HEADER + "import typing\n", body="typing.get_type_hints(self)\n" + LAUNCH), "typing offers only"),
    ("F_importlib", ADD, add_src(header=HEADER + "import torch.nn.functional as F\n", body="F.importlib.import_module('os')\n" + LAUNCH),
     "module outside the allow-list"),
    ("triton_testing", ADD, add_src(body="triton.testing.do_bench(lambda: None)\n" + LAUNCH), "triton.testing is out of reach"),
    ("triton_runtime", ADD, add_src(header=HEADER + "from triton.runtime import driver\n"), "import triton.runtime is not allowed"),
    ("tl_extra_loader", ADD, add_src(body="tl.extra.module_from_spec(None)\n" + LAUNCH), "a module outside the allow-list"),
    ("inline_asm", ADD, add_src(prelude="@triton.jit\ndef k(x):\n    y = tl.inline_asm_elementwise('mov.u32 $0, %globaltimer_lo;', '=r', [], "
                                        "dtype=tl.int32, is_pure=False, pack=1)\n"), "inline assembly"),
    ("globaltimer", ADD, add_src(prelude="@triton.jit\ndef k(x):\n    t = tl.extra.cuda.globaltimer()\n"), "timer access"),
    ("device_print", ADD, add_src(prelude="@triton.jit\ndef k(x):\n    tl.device_print('x', x)\n"), "printing"),
    # module objects as values (they would carry the checks' subject out of sight)
    ("module_alias", ADD, add_src(body="G = torch.nn.functional\n" + LAUNCH), "using the module torch.nn.functional as a value"),
    ("module_argument", ADD, add_src(prelude="def patch(m):\n    return m\n", body="patch(torch.cuda)\n" + LAUNCH), "torch.cuda as a value"),
    ("module_in_tuple", ADD, add_src(body="for m in (torch, triton):\n    pass\n" + LAUNCH), "as a value"),
    ("module_leaf", ADD, add_src(header=HEADER + "import torch.nn.functional as F\n", body="T = F.torch\nT.load('x')\n" + LAUNCH),
     "using the module torch.nn.functional.torch as a value"),
    ("module_leaf_tl", ADD, add_src(body="c = tl.core\n" + LAUNCH), "as a value"),
    ("alias_conflict", ADD, add_src(header=HEADER + "import math as t\n", prelude="def f():\n    import torch as t\n    return t.load('x')\n"),
     "t is imported as two different things"),
    ("param_shadows_alias", ADD, add_src(header=HEADER + "import math\n", prelude="def f(math):\n    return math.load('x')\n"),
     "parameter math shadows the imported name"),
    # monkeypatching and timers
    ("patch_synchronize", ADD, add_src(prelude="torch.cuda.synchronize = lambda *a: None\n"), "only attributes of self may be set"),
    ("patch_aliased", ADD, add_src(header=HEADER + "import torch as t\n", prelude="t.cuda.synchronize = lambda *a: None\n"),
     "only attributes of self may be set"),
    ("patch_event", ADD, add_src(prelude="torch.cuda.Event.elapsed_time = lambda s, e: 1e-9\n"), "not allowed"),
    ("patch_tensor", ADD, add_src(prelude="torch.Tensor.add = lambda x, y: x\n"), "only attributes of self"),
    ("patch_module_call", ADD, add_src(prelude="nn.Module.__call__ = None\n"), "not allowed"),
    ("patch_via_class", ADD, add_src(body="ModelNew.forward = lambda s, x, y: x\n" + LAUNCH), "not allowed"),
    ("patch_subscript", ADD, add_src(body="torch.cuda.__dict__['synchronize'] = None\n" + LAUNCH), "not allowed"),
    ("del_attribute", ADD, add_src(prelude="del torch.cuda.synchronize\n"), "only attributes of self"),
    ("self_trick_nested", ADD, add_src(body="def g(self):\n    self.synchronize = None\ng(a)\n" + LAUNCH), "only attributes of self may be set"),
    ("self_trick_static", ADD, add_src(extra="@staticmethod\ndef g(self):\n    self.synchronize = None\n"), "only attributes of self"),
    ("self_trick_unbound", ADD, add_src(extra="def g(self):\n    self.elapsed = None\n", body="ModelNew.g(a)\n" + LAUNCH),
     "calling methods through the class is not allowed"),
    ("rebind_self", ADD, add_src(body="self = a\n" + LAUNCH), "rebinding self"),
    ("global_rebind", ADD, add_src(prelude="def f():\n    global torch\n    torch = None\n"), "rebinding the imported name torch"),
    ("rebind_import", ADD, add_src(prelude="triton = None\n"), "rebinding triton"),
    ("shadow_def", ADD, add_src(prelude="def triton():\n    pass\n"), "rebinding triton"),
    ("cuda_event", ADD, add_src(body="e = torch.cuda.Event(enable_timing=True)\n" + LAUNCH), "timer access"),
    ("elapsed_time", ADD, add_src(body="s = torch.cuda.current_stream().record_event()\ns.elapsed_time(s)\n" + LAUNCH), "timer access"),
    ("profiler", ADD, add_src(body="torch.profiler.profile()\n" + LAUNCH), "timer access"),
    ("time_module", ADD, add_src(header=HEADER + "import time\n", prelude="time.perf_counter = lambda: 0.0\n"), "import time is not allowed"),
    # no fallbacks hidden behind exceptions
    ("try_except", ADD, add_src(body="try:\n    " + LAUNCH.replace("\n", "\n    ") + "\nexcept Exception:\n    return a + b"),
     "try/except is not allowed"),
    ("try_finally", ADD, add_src(body="try:\n    pass\nfinally:\n    pass\n" + LAUNCH), "try/except is not allowed"),
    # reference fallbacks (vector_add: a + b)
    ("plus", ADD, add_src(body="return a + b"), "`+` on tensors is the reference's own operation"),
    ("plus_after_glue", ADD, add_src(body="x = a.contiguous().view(-1)\nreturn x + b"), "`+` on tensors"),
    ("aug_plus", ADD, add_src(body="out = a.clone()\nout += b\nreturn out"), "`+` on tensors"),
    ("torch_add", ADD, add_src(body="return torch.add(a, b)"), "torch.add is the reference's own operation"),
    ("method_add", ADD, add_src(body="return a.add(b)"), ".add() is the reference's own operation"),
    ("inplace_add", ADD, add_src(body="return a.clone().add_(b)"), ".add_() is the reference's own operation"),
    ("helper_plus", ADD, add_src(prelude="def helper(x, y):\n    return x + y\n", body="return helper(a, b)"), "`+` on tensors"),
    ("method_helper_plus", ADD, add_src(extra="def combine(self, x, y):\n    return x + y\n", body="return self.combine(a, b)"), "`+` on tensors"),
    ("lambda_plus", ADD, add_src(body="f = lambda x, y: x + y\nreturn f(a, b)"), "`+` on tensors"),
    ("self_param_plus", ADD, add_src(init="self.w = nn.Parameter(torch.zeros(1))", body="return a + self.w"), "`+` on tensors"),
    # reference fallbacks (softmax)
    ("torch_softmax", SOFTMAX, sm_src(body="return torch.softmax(x, dim=1)"), "torch.softmax is the reference's own operation"),
    ("F_softmax_aliased", SOFTMAX, sm_src(header=HEADER + "import torch.nn.functional as G\n", body="return G.softmax(x, dim=1)"),
     "torch.nn.functional.softmax is the reference's own operation"),
    ("full_path_softmax", SOFTMAX, sm_src(body="return torch.nn.functional.softmax(x, dim=1)"), "reference's own operation"),
    ("from_import_softmax", SOFTMAX, sm_src(header=HEADER + "from torch.nn.functional import softmax as sm\n", body="return sm(x, 1)"),
     "torch.nn.functional.softmax is the reference's own operation"),
    ("method_softmax", SOFTMAX, sm_src(body="return x.softmax(1)"), ".softmax() is the reference's own operation"),
    ("unbound_softmax", SOFTMAX, sm_src(body="return torch.Tensor.softmax(x, 1)"), "torch.Tensor.softmax is the reference's own"),
    ("type_softmax", SOFTMAX, sm_src(body="return type(x).softmax(x, 1)"), ".softmax() is the reference's own operation"),
    ("lambda_softmax", SOFTMAX, sm_src(prelude="f = lambda t: torch.softmax(t, 1)\n", body="return f(x)"), "reference's own operation"),
    ("helper_softmax", SOFTMAX, sm_src(prelude="def helper(t):\n    return t.softmax(-1)\n", body="return helper(x)"), ".softmax()"),
    ("special_softmax", SOFTMAX, sm_src(body="return torch.special.softmax(x, 1)"), "reference's own operation"),
    ("nn_softmax_call", SOFTMAX, sm_src(body="return nn.Softmax(dim=1)(x)"), "only be built into self"),
    ("nn_softmax_attr", SOFTMAX, sm_src(init="self.sm = nn.Softmax(dim=1)", body="return self.sm(x)"), "self.sm is a module of a kind"),
    ("nn_softmax_alias", SOFTMAX, sm_src(init="self.sm = nn.Softmax(dim=1)", body="f = self.sm\nreturn f(x)"), "self.sm is a module"),
    ("nn_softmax_sequential", SOFTMAX, sm_src(init="self.seq = nn.Sequential(nn.Softmax(dim=1))", body="return self.seq(x)"),
     "self.seq is a module"),
    ("nn_softmax_base", SOFTMAX, sm_src(prelude="class S(nn.Softmax):\n    pass\n"), "only be built into self"),
    ("string_built_getattr", SOFTMAX, sm_src(body="return getattr(torch, 'soft' + 'max')(x, 1)"), "getattr() is not allowed"),
    ("dict_lookup", SOFTMAX, sm_src(body="return torch.__dict__['softmax'](x, 1)"), "not allowed"),
    ("bound_method", SOFTMAX, sm_src(body="f = x.softmax\nreturn f(1)"), ".softmax is the reference's own operation"),
    ("nn_internals", SOFTMAX, sm_src(init="self.sm = nn.Softmax(dim=1)", body="return self._modules['sm'](x)"), "._modules is not allowed"),
    ("builtin_sum", ADD, add_src(body="return sum([a, b])"), "sum() on tensors is the reference's own operation (add)"),
    ("pluggable_allocator", ADD, add_src(body="torch.cuda.CUDAPluggableAllocator('x.so', 'a', 'f')\n" + LAUNCH), "loading shared libraries"),
    ("kernel_fn_fallback", SOFTMAX, sm_src(prelude="@triton.jit\ndef fake(t):\n    return torch.softmax(t, 1)\n", body="return fake.fn(x)"),
     "torch.softmax is the reference's own operation"),
    ("kernel_fn_method", SOFTMAX, sm_src(prelude="@triton.jit\ndef fake(t):\n    return t.softmax(1)\n", body="return fake.fn(x)"),
     ".fn is not allowed: a Triton kernel's Python function"),
    ("aten_ops", SOFTMAX, sm_src(body="return torch.ops.aten._softmax(x, 1, False)"), "not allowed"),
]


@pytest.mark.parametrize("task,source,fragment", [c[1:] for c in REJECTED], ids=[c[0] for c in REJECTED])
def test_rejected(task: TorchTask, source: str, fragment: str) -> None:
    why = check(task, source)
    assert why is not None, "accepted"
    assert fragment in why, why
    assert "\n" not in why and why.startswith("solution.py"), why
    if not why.startswith("solution.py is larger") and "does not parse: ValueError" not in why:
        assert " line " in why, why


# ---------------------------------------------------------------- cuda tasks: load_inline and its sources
CUDA_REJECTED = [
    ("ldflags", cuda_src(options=", extra_ldflags=['-ldl']"), "flag '-ldl' is not allowed in extra_ldflags"),
    ("include_paths", cuda_src(options=", extra_include_paths=['/etc']"), "extra_include_paths"),
    ("build_directory", cuda_src(options=", build_directory='/tmp'"), "build_directory"),
    ("bad_flag", cuda_src(options=", extra_cuda_cflags=['-O3', '-Xcompiler', '-fplugin=x.so']"), "optimization flags only"),
    ("flag_variable", cuda_src(options=", extra_cflags=FLAGS", prelude="FLAGS = ['-O3']\n"), "optimization flags only"),
    ("kwargs", cuda_src(options=", **OPTS", prelude="OPTS = {}\n"), "by keyword"),
    ("name_path", cuda_src().replace("name='k_add'", "name='../../x'"), "identifier"),
    ("fstring", cuda_src(cuda='f"__global__ void k() {{}}"'), "f-strings are not allowed"),
    ("joined", cuda_src(cuda='"".join(["__global__ ", "void k() {}"])'), "cannot be determined statically"),
    ("rebound", cuda_src(prelude="", cuda='"x"\nSRC = SRC + "y"'), "bound once"),
    ("file_read", cuda_src(cuda="open('k.cu').read()"), "open() is not allowed"),
    ("asm", cuda_src(cuda='"__global__ void k(unsigned *t) { asm volatile(\\"mov.u32 %0, %%globaltimer_lo;\\" : \\"=r\\"(*t)); }"'),
     "inline assembly"),
    ("include_file", cuda_src(cuda='"#include \\"/etc/passwd\\"\\n"'), "#include only"),
    ("include_cublas", cuda_src(cuda='"#include <cublas_v2.h>\\n"'), "#include only"),
    ("cublas_call", cuda_src(cuda='"void f() { cublasSgemm(0); }"'), "uses cublasSgemm: libraries"),
    ("clock64", cuda_src(cuda='"__global__ void k(long long *t) { *t = clock64(); }"'), "uses clock64"),
    ("event_timer", cuda_src(cuda='"void f() { float ms; cudaEventElapsedTime(&ms, 0, 0); }"'), "cudaEventElapsedTime"),
    ("host_thread", cuda_src(cuda='"#include <thread>\\nvoid f() { std::thread t([]{}); t.detach(); }"'), "not allowed"),
    ("std_thread", cuda_src(cuda='"void f() { std::thread t([]{}); t.detach(); }"'), "uses thread"),
    ("printf", cuda_src(cuda='"__global__ void k() { printf(\\"speedup 100x\\"); }"'), "printf"),
    ("system", cuda_src(cuda='"void f() { system(\\"true\\"); }"'), "system"),
    ("system_macro", cuda_src(cuda='"#define RUN system\\nvoid f() { RUN(\\"true\\"); }"'), "uses system"),
    ("token_paste", cuda_src(cuda='"#define C(a, b) a##b\\nvoid f() { C(sys, tem)(\\"true\\"); }"'), "token pasting"),
    ("ucn", cuda_src(cuda='"void f() { \\\\u0073ystem(\\"true\\"); }"'), "universal character names"),
    ("getenv", cuda_src(cuda='"void f() { getenv(\\"HOME\\"); }"'), "getenv"),
    ("torch_add_in_cpp", cuda_src(cuda='"torch::Tensor add(torch::Tensor a, torch::Tensor b) { return torch::add(a, b); }"'),
     "calls add(), the reference's own operation"),
    ("method_add_in_cpp", cuda_src(cuda='"torch::Tensor add(torch::Tensor a, torch::Tensor b) { return a.add(b); }"'), "reference's own"),
    ("syscall_macro", cuda_src(cuda='"#define S syscall\\nvoid f() { S(60, 0); }"'), "uses syscall"),
    ("filesystem", cuda_src(cuda='"void f() { std::filesystem::remove_all(\\"/tmp/x\\"); }"'), "uses filesystem"),
    ("aten_native", cuda_src(cuda='"torch::Tensor add(torch::Tensor a, torch::Tensor b) { return at::native::add(a, b, 1); }"'), "ATen internals"),
    ("torch_load_cpp", cuda_src(cuda='"void f() { torch::Tensor t; torch::load(t, \\"x.pt\\"); }"'), "file access"),
    ("cpp_sources_checked", cuda_src(cpp='"#include \\"/etc/passwd\\"\\n"'), "#include only"),
]


@pytest.mark.parametrize("source,fragment", [c[1:] for c in CUDA_REJECTED], ids=[c[0] for c in CUDA_REJECTED])
def test_cuda_rejected(source: str, fragment: str) -> None:
    why = check(CUDA_ADD, source)
    assert why is not None, "accepted"
    assert fragment in why, why
    assert "\n" not in why and " line " in why, why


def test_cuda_include_allow_list() -> None:
    src = "\n".join(f"#include <{h}>" for h in sorted(CUDA_INCLUDES))
    assert check(CUDA_ADD, cuda_src(cuda=repr(src + "\n__global__ void k() {}\n"))) is None


def test_cuda_error_names_the_python_line() -> None:
    src = cuda_src(cuda='"""\n__global__ void k() {\n    printf(\\"x\\");\n}\n"""')
    line = src.splitlines().index("SRC = \"\"\"") + 1
    assert (check(CUDA_ADD, src) or "").startswith(f"solution.py line {line}: (C++/CUDA source)")


@pytest.mark.parametrize("source,expected", [
    (cuda_src(cuda='"A"'), ["A"]),
    (cuda_src(cuda='["A", "B"]'), ["A", "B"]),
    (cuda_src(cuda='"A" + "B"'), ["AB"]),
    (cuda_src(cuda='PART + "B"', prelude='PART = "A"\n'), ["AB"]),
    (cuda_src(cuda='[PART, "B"]', prelude='PART = "A"\n'), ["A", "B"]),
    (cuda_src(cuda='("A"\n       "B")'), ["AB"]),
    ("import torch\nx = 1\n", []),
])
def test_cuda_sources_found(source: str, expected: list[str]) -> None:
    assert cuda_sources(source) == expected


@pytest.mark.parametrize("expr", ["n" + " + n" * 950, "a" + " + a" * 950, "torch" + ".x" * 950, "x" + "[0]" * 950])
def test_deep_nesting_is_an_answer_not_a_crash(expr: str) -> None:
    def deep(depth: int) -> str | None:  # the evaluator calls the gate from a deeper stack than a test does
        return deep(depth - 1) if depth else check(ADD, add_src(body=f"y = {expr}\n" + LAUNCH))
    why = deep(150)
    assert why is None or (why.startswith("solution.py") and "\n" not in why)


def test_cuda_sources_of_the_test_task() -> None:
    found = cuda_sources(CUDA_ADD.baseline_source())
    assert isinstance(found, list) and len(found) == 1 and "__global__ void add_kernel" in found[0]


@pytest.mark.parametrize("source,fragment", [
    (cuda_src(cuda='f"{1}"'), "f-strings"),
    (cuda_src(cuda='SRC2', prelude='SRC2 = "A"\nSRC2 = "B"\n'), "bound once"),
    (cuda_src(cuda='make()', prelude='def make():\n    return "A"\n'), "cannot be determined"),
    ("def (", "does not parse"),
])
def test_cuda_sources_undeterminable(source: str, fragment: str) -> None:
    found = cuda_sources(source)
    assert isinstance(found, str) and fragment in found and "\n" not in found, found
