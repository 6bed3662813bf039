"""CUDA targets: tasks/cuda, nvcc (kernopt/evaluators/c_family/nvcc.py), the cuda-c evaluator and its object gate.

Without a GPU (here) cuda-c candidates are compiled, inspected and linked but never run: evaluating
one ends `unverified` with its ptxas resources. The tests marked `gpu` run the verify/time path and
the device-side protections (device outputs poisoned before every call, device inputs checksummed)
and are skipped where `nvidia-smi -L` finds no GPU.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernopt.candidate import Candidate
from kernopt.config import EvalConfig
from kernopt.errors import ToolMissing
from kernopt.evaluators import get_evaluator
from kernopt.evaluators.c_family.cuda_c import NO_GPU, CudaCEvaluator, parse_gpu_query
from kernopt.evaluators.c_family.nvcc import NvccOutcome, compile_cuda_sources, describe_resources, nvcc_available, parse_ptxas, uses_torch
from kernopt.evaluators.knobs import apply_knobs, declared_knobs
from kernopt.evaluators.result import EvalResult
from kernopt.sandbox import ExecResult, get_sandbox
from kernopt.task import Task, TorchTask, load_task
from tests.conftest import REPO, enterable_tmpdir

CUDA_TASKS = REPO / "tasks" / "cuda"
TASK_DIRS = sorted(p for p in CUDA_TASKS.iterdir() if (p / "task.toml").is_file())
CUDA_C = [p for p in TASK_DIRS if load_task(p).target == "cuda-c"]
TORCH_CUDA = [p for p in TASK_DIRS if load_task(p).target == "cuda"]
SAXPY = CUDA_TASKS / "saxpy"

needs_nvcc = pytest.mark.skipif(not nvcc_available() or shutil.which("gcc") is None, reason="needs nvcc and gcc")


def run_here(cmd: list[str], cwd: Path, timeout: float) -> ExecResult:
    """A `run` for compile_cuda_sources: the command on this machine, unsandboxed (tests only)."""
    t = time.monotonic()
    try:
        p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return ExecResult(returncode=-9, timed_out=True, wall_s=time.monotonic() - t)
    except FileNotFoundError as e:
        return ExecResult(returncode=127, stderr=f"sh: 1: {cmd[0]}: not found ({e})")
    return ExecResult(returncode=p.returncode, stdout=p.stdout, stderr=p.stderr, wall_s=time.monotonic() - t)


def module_string(source: str, name: str) -> str:
    """A module-level string constant of a solution.py (read with ast, never imported)."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            assert isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
            return node.value.value
    raise AssertionError(f"no module-level string {name}")


def solution_cuda_sources(source: str) -> list[str]:
    """The CUDA sources a solution hands to load_inline: the Python gate's extraction where it exists."""
    try:
        from kernopt.evaluators.torch_family.py_gate import cuda_sources
    except ImportError:
        return [module_string(source, "CUDA_SRC")]
    found = cuda_sources(source)
    assert not isinstance(found, str), found
    return found


# ---------------------------------------------------------------- the task suite
def test_the_suite_has_both_kinds_and_every_task_loads() -> None:
    assert len(CUDA_C) >= 3 and len(TORCH_CUDA) >= 3
    readme = (CUDA_TASKS / "README.md").read_text()
    for d in TASK_DIRS:
        task = load_task(d)
        assert task.name == d.name and task.uses_gpu and task.tunables, d
        assert f"[{d.name}]({d.name}/)" in readme or f"`{d.name}`" in readme, f"{d.name} missing from tasks/cuda/README.md"
        if isinstance(task, Task):
            src = task.baseline_source()
            assert task.language == "cuda" and task.compiler == "nvcc" and task.harness.endswith(".cu")
            for f in task.functions:
                assert re.search(rf'extern "C" void {f}\(', src), f"{d.name}: {f} must be an extern \"C\" launch function"
            for t in task.tunables:  # -DNAME=value must override the kernel's default
                assert re.search(rf"#ifndef {t.name}\n#define {t.name} ", src), f"{d.name}: tunable {t.name} needs #ifndef/#define"
        else:
            assert isinstance(task, TorchTask) and task.target == "cuda"
            src = task.baseline_source()
            assert {t.name for t in task.tunables} <= declared_knobs(src)
            for cuda in solution_cuda_sources(src):
                assert not uses_torch(cuda), f"{d.name}: the CUDA source must not need torch headers (keep them in cpp_sources)"


@needs_nvcc
@pytest.mark.parametrize("task_dir", TORCH_CUDA, ids=lambda p: p.name)
def test_torch_extension_cuda_sources_compile_with_resources(task_dir: Path, tmp_path: Path) -> None:
    task = load_task(task_dir)
    assert isinstance(task, TorchTask)
    src = task.baseline_source()
    knobs = {t.name: str(t.values[-1]) for t in task.tunables}  # the largest tunable values compile too
    for source in (src, apply_knobs(src, knobs)):
        t = time.monotonic()
        out = compile_cuda_sources(solution_cuda_sources(source), task.build.arch, run_here, tmp_path, 120)
        assert out.ok, out.error + "\n" + out.log
        assert time.monotonic() - t < 60  # the fast path: no torch headers
        assert out.resources and all(r.registers > 0 and r.arch == task.build.arch for r in out.resources)
        assert "(" in out.resources[0].name  # demangled: name(argument types)


# ---------------------------------------------------------------- nvcc.py
PTXAS_SM90 = """\
ptxas info    : Overriding maximum register limit 256 for '_Z6spillyPKfPfi' with  24 of maxrregcount option
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z6spillyPKfPfi' for 'sm_90'
ptxas info    : Function properties for _Z6spillyPKfPfi
    1736 bytes stack frame, 2196 bytes spill stores, 3724 bytes spill loads
ptxas info    : Used 24 registers, used 0 barriers, 1736 bytes cumulative stack size
ptxas info    : Compile time = 40.101 ms
ptxas info    : Compiling entry function '_Z5heavyILi256EEvPKfPfi' for 'sm_90'
ptxas info    : Function properties for _Z5heavyILi256EEvPKfPfi
    1024 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 1024 bytes cumulative stack size, 4096 bytes smem
ptxas info    : Compile time = 25.209 ms
"""
PTXAS_TWO_ARCHS = """\
ptxas info    : 0 bytes gmem, 256 bytes cmem[3]
ptxas info    : Compiling entry function '_Z3dynPf' for 'sm_80'
ptxas info    : Function properties for _Z3dynPf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 1 barriers, 360 bytes cmem[0]
ptxas info    : Compile time = 1.041 ms
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z3dynPf' for 'sm_90'
ptxas info    : Function properties for _Z3dynPf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers, used 1 barriers
ptxas info    : Compiling entry function 'plain_c_kernel' for 'sm_90'
ptxas info    : Function properties for plain_c_kernel
    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 255 registers, used 0 barriers, 8 bytes cumulative stack size, 49152 bytes smem, 12 bytes cmem[2]
"""


def test_parse_ptxas_reads_every_entry_function() -> None:
    spilly, heavy = parse_ptxas(PTXAS_SM90, "sm_90")
    assert (spilly.registers, spilly.spill_stores, spilly.spill_loads, spilly.stack_bytes, spilly.shared_bytes) == (24, 2196, 3724, 1736, 0)
    assert (heavy.registers, heavy.shared_bytes, heavy.stack_bytes, heavy.spill_stores) == (32, 4096, 1024, 0)
    if shutil.which("c++filt"):
        assert spilly.name == "spilly(float const*, float*, int)" and heavy.name == "heavy<256>(float const*, float*, int)"
    assert "spills 2196/3724 B" in spilly.describe() and "no spills" in heavy.describe()
    assert describe_resources([spilly, heavy]).startswith("spilly: 24 registers, spills 2196/3724 B, 0 B shared; heavy<256>: 32 registers")


def test_parse_ptxas_picks_the_requested_architecture() -> None:
    sm90 = parse_ptxas(PTXAS_TWO_ARCHS, "sm_90")
    assert [(r.arch, r.registers) for r in sm90] == [("sm_90", 12), ("sm_90", 255)]
    plain = sm90[1]
    assert (plain.name, plain.shared_bytes, plain.constant_bytes, plain.spill_stores) == ("plain_c_kernel", 49152, 12, 4)
    sm80 = parse_ptxas(PTXAS_TWO_ARCHS, "sm_80")
    assert [(r.registers, r.constant_bytes) for r in sm80] == [(10, 360)]
    assert len(parse_ptxas(PTXAS_TWO_ARCHS, "sm_100")) == 3  # none for that arch: all of them
    assert parse_ptxas("nvcc warning : nothing here\n", "sm_90") == []


@needs_nvcc
def test_compile_cuda_sources_reports_the_first_error_line(tmp_path: Path) -> None:
    good = "__global__ void k(float *x, int n) { int i = threadIdx.x; if (i < n) x[i] *= 2.0f; }\n"
    bad = "__global__ void k(float *x) { x[0] = undefined_thing; }\n"
    out = compile_cuda_sources([good, bad], "sm_90", run_here, tmp_path, 60)
    assert not out.ok and out.error == 'cuda_source_1.cu(1): error: identifier "undefined_thing" is undefined'
    assert [r.name for r in out.resources] in (["k(float*, int)"], ["_Z1kPfi"])  # the first source's kernels
    assert "$ nvcc --cubin -arch=sm_90" in out.log
    big = "__global__ void k(float *x) { __shared__ float s[100000]; s[threadIdx.x] = 1; x[0] = s[3]; }\n"
    out = compile_cuda_sources([big], "sm_90", run_here, tmp_path, 60)
    assert not out.ok and out.error.startswith("ptxas error") and "too much shared data" in out.error


def test_compile_cuda_sources_adds_torch_paths_only_for_torch_sources(tmp_path: Path) -> None:
    seen: list[tuple[list[str], float]] = []

    def fake(cmd: list[str], cwd: Path, timeout: float) -> ExecResult:
        seen.append((cmd, timeout))
        return ExecResult(returncode=0, stderr="ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
                                               "ptxas info    : Used 8 registers, used 0 barriers\n")

    plain = "__global__ void k(float *x) { x[0] = 1; }"
    torchy = "#include <torch/types.h>\n__global__ void k(float *x) { x[0] = 1; }\nvoid f(at::Tensor t) {}"
    out = compile_cuda_sources([plain, torchy], "sm_90", fake, tmp_path, 500, torch_includes=["-I/opt/torch/include"])
    assert out.ok and len(out.resources) == 2 and out.resources[0].registers == 8
    (c1, t1), (c2, t2) = seen
    assert c1[:4] == ["nvcc", "--cubin", "-arch=sm_90", "-O3"] and "-Xptxas" in c1 and "-v" in c1
    assert c1[c1.index("-include") + 1] == "cuda_runtime.h" and not any(a.startswith("-I") for a in c1)
    assert "-I/opt/torch/include" in c2 and "-DTORCH_EXTENSION_NAME=kernopt_check" in c2 and "-std=c++20" in c2
    assert c1[-1] == "cuda_source_0.cu" and c2[-1] == "cuda_source_1.cu" and (tmp_path / "cuda_source_1.cu").read_text() == torchy
    assert 0 < t2 <= t1 <= 500  # one timeout shared by all the sources
    assert uses_torch("#include <ATen/ATen.h>\n") and uses_torch("c10::Half h;") and not uses_torch("// no torch here\nint x;")


def test_compile_cuda_sources_says_when_nvcc_is_missing_or_slow(tmp_path: Path) -> None:
    missing = compile_cuda_sources(["__global__ void k() {}"], "sm_90",
                                   lambda c, d, t: ExecResult(returncode=127, stderr="sh: 1: nvcc: not found"), tmp_path, 10)
    assert not missing.ok and missing.error.startswith("nvcc not found")
    slow = compile_cuda_sources(["__global__ void k() {}"], "sm_90",
                                lambda c, d, t: ExecResult(returncode=-9, timed_out=True), tmp_path, 10)
    assert slow == NvccOutcome(ok=False, error="nvcc timed out after 10s on CUDA source 1", log=slow.log)


def test_gpu_query_gives_name_and_architecture() -> None:
    gpu = parse_gpu_query("NVIDIA H100 80GB HBM3, 9.0\nNVIDIA H100 80GB HBM3, 9.0\n")
    assert gpu is not None and (gpu.name, gpu.arch) == ("NVIDIA H100 80GB HBM3", "sm_90")
    assert parse_gpu_query("NVIDIA H100 80GB HBM3, 9.0", "sm_90a").arch == "sm_90a"  # type: ignore[union-attr]
    assert parse_gpu_query("NVIDIA GeForce RTX 5090, 12.0", "sm_90").arch == "sm_120"  # type: ignore[union-attr]
    assert parse_gpu_query("") is None and parse_gpu_query("No devices were found") is None


# ---------------------------------------------------------------- cuda-c through the evaluator
@pytest.fixture(scope="module")
def workroot() -> Iterator[Path]:
    with enterable_tmpdir("kernopt-cuda-") as d:
        yield d


@pytest.fixture(scope="module")
def saxpy_ev(workroot: Path) -> Iterator[CudaCEvaluator]:
    if not nvcc_available():
        pytest.skip("needs nvcc")
    ev = get_evaluator(load_task(SAXPY), get_sandbox("local"), EvalConfig(rounds=2), workroot / "saxpy")
    assert isinstance(ev, CudaCEvaluator)
    yield ev
    ev.close()


def evaluate(ev: CudaCEvaluator, source: str, **knobs: object) -> EvalResult:
    return ev.evaluate(Candidate(files={ev.task.kernel: source}, **knobs))  # type: ignore[arg-type]


@needs_nvcc
@pytest.mark.parametrize("task_dir", CUDA_C, ids=lambda p: p.name)
def test_cuda_c_baseline_builds_and_is_unverified_without_a_gpu(task_dir: Path, workroot: Path) -> None:
    task = load_task(task_dir)
    ev = get_evaluator(task, get_sandbox("local"), EvalConfig(rounds=2), workroot / task.name)
    assert isinstance(ev, CudaCEvaluator)
    try:
        base = evaluate(ev, task.baseline_source())
        tuned = evaluate(ev, task.baseline_source(), defines={t.name: str(t.values[-1]) for t in task.tunables})
        if ev.gpu() is not None:
            assert base.status == tuned.status == "ok", base.reason + tuned.reason
            return
        for r in (base, tuned):
            assert r.status == "unverified", f"{r.status}: {r.reason}\n{r.log}"
            assert r.verification.device == NO_GPU and r.timing is None and r.reward == 0.0 and r.speedup is None
            assert r.resources and all(k.registers > 0 and k.arch == task.build.arch for k in r.resources)
            kernels = describe_resources(r.resources)
            assert r.reason == f"compiled for {task.build.arch} with nvcc ({kernels}); no GPU here, so not run or timed"
            assert "build" in r.phase_s
    finally:
        ev.close()


def saxpy_variant(body: str = "", launch: str = "", extra: str = "") -> str:
    """The saxpy kernel with a changed launch-function body, plus extra top-level code."""
    launch = launch or "saxpy_kernel<<<(unsigned)((n + 127) / 128), 128>>>(n, a, x, y);"
    return (f"{extra}\n__global__ void saxpy_kernel(long n, float a, const float *x, float *y) {{\n"
            "    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"    if (i < n) y[i] = a * x[i] + y[i];{body}\n}}\n"
            f'extern "C" void launch_saxpy(long n, float a, const float *x, float *y) {{\n    {launch}\n}}\n')


@needs_nvcc
def test_cuda_c_compile_error_names_the_nvcc_error_line(saxpy_ev: CudaCEvaluator) -> None:
    r = evaluate(saxpy_ev, saxpy_variant(body=" y[0] += undefined_thing;"))
    assert r.status == "compile_error", r.reason
    assert r.reason == 'kernel.cu does not compile: kernel.cu(4): error: identifier "undefined_thing" is undefined'
    r = evaluate(saxpy_ev, saxpy_variant(extra="__global__ void big(float *x) { __shared__ float s[100000]; s[threadIdx.x] = 1; x[0] = s[7]; }"))
    assert r.status == "compile_error" and "too much shared data" in r.reason, r.reason


@needs_nvcc
def test_cuda_c_control_with_every_legitimate_construct_passes_the_gates(saxpy_ev: CudaCEvaluator) -> None:
    """Namespaces, templates, static kernels, __device__/__constant__ variables, runtime API calls, the
    largest flags: nothing here may be rejected."""
    extra = ("#include <cuda_runtime.h>\n#include <math.h>\nnamespace ns { __global__ void k2(float *y) { y[0] = sqrtf(y[0]); } }\n"
             "template <int B> __global__ void kt(float *y) { y[threadIdx.x] += B; }\nstatic __global__ void ks(float *y) {}\n"
             "__device__ float dvar;\n__constant__ float cvar[4];\nstatic float host_table[4] = {1, 2, 3, 4};\n")
    launch = ("float *p = 0; cudaMalloc(&p, 16); cudaMemcpyToSymbol(cvar, host_table, sizeof host_table); cudaFree(p);\n"
              "    cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); cudaStreamDestroy(s);\n"
              "    if (n < 0) { ns::k2<<<1, 1>>>(y); kt<3><<<1, 1>>>(y); ks<<<1, 1>>>(y); }\n"
              "    saxpy_kernel<<<(unsigned)((n + 127) / 128), 128>>>(n, a, x, y); (void)cudaGetLastError();")
    r = evaluate(saxpy_ev, saxpy_variant(launch=launch, extra=extra), cflags=["-O2", "--maxrregcount=64", "-Xptxas=-O3"])
    assert r.status in ("unverified", "ok"), f"{r.status}: {r.reason}"
    names = {k.name.split("(")[0] for k in r.resources}
    assert {"saxpy_kernel", "ns::k2", "kt<3>", "ks"} <= names or not shutil.which("c++filt")


@needs_nvcc
def test_cuda_c_host_code_at_o0_passes_the_object_gate(saxpy_ev: CudaCEvaluator) -> None:
    """At -O0 nvcc's registration code calls its helpers directly and the callback through a pointer."""
    r = evaluate(saxpy_ev, saxpy_ev.task.baseline_source(), cflags=["-O0", "-lineinfo"])
    assert r.status in ("unverified", "ok"), f"{r.status}: {r.reason}"


CUB_BLOCK = """
#include <cub/block/block_reduce.cuh>
#include <cooperative_groups.h>
#define BLOCK 256
__global__ void partial(long n, const float *x, double *out) {
    typedef cub::BlockReduce<double, BLOCK> Reduce;
    __shared__ typename Reduce::TempStorage tmp;
    double v = 0;
    for (long i = (long)blockIdx.x * BLOCK + threadIdx.x; i < n; i += (long)gridDim.x * BLOCK) v += x[i];
    cooperative_groups::this_thread_block().sync();
    double s = Reduce(tmp).Sum(v);
    if (threadIdx.x == 0) atomicAdd(out, s);
}
extern "C" void launch_reduce_sum(long n, const float *x, double *out) {
    cudaMemsetAsync(out, 0, sizeof(double));
    int dev = 0, sms = 0, per = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, partial, BLOCK, 0);
    partial<<<sms * per, BLOCK>>>(n, x, out);
}
"""


@pytest.mark.slow
@needs_nvcc
def test_cuda_c_block_level_cub_and_cooperative_groups_pass_but_cub_cuh_does_not(workroot: Path) -> None:
    """Block-level cub (libcu++'s unique inline objects, typeinfo) is fine; <cub/cub.cuh> brings host
    I/O initialization and NVTX's dlopen-based injection loader, so it is rejected with a hint (~30 s)."""
    ev = get_evaluator(load_task(CUDA_TASKS / "reduce_sum"), get_sandbox("local"), EvalConfig(rounds=2), workroot / "cub")
    try:
        r = evaluate(ev, CUB_BLOCK)
        assert r.status in ("unverified", "ok"), f"{r.status}: {r.reason}"
        assert any(k.shared_bytes > 0 for k in r.resources)
        r = evaluate(ev, CUB_BLOCK.replace("<cub/block/block_reduce.cuh>", "<cub/cub.cuh>"))
        assert r.status == "rejected" and "include the block- or warp-level cub headers" in r.reason, r.reason
    finally:
        ev.close()


# (source, status, substring of the reason): what the gates must catch in a cuda-c kernel.
GATE_CASES = {
    "fopen": (saxpy_variant(extra='#include <stdio.h>\nstatic void leak() { fopen("/etc/passwd", "r"); }'), "rejected", "calls fopen()"),
    "fopen_via_token_pasting": (saxpy_variant(extra='#include <stdio.h>\n#define OPEN(p) fo##pen(p, "r")',
                                              launch='OPEN("/etc/passwd"); saxpy_kernel<<<1, 1>>>(n, a, x, y);'),
                                "rejected", "kernel references fopen"),
    "system": (saxpy_variant(extra="#include <stdlib.h>", launch='system("touch /tmp/x");'), "rejected", "calls system()"),
    "timer": (saxpy_variant(extra="#include <time.h>", launch="struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);"),
              "rejected", "calls clock_gettime()"),
    "extra_global_function": (saxpy_variant(extra="float helper(float v) { return 2 * v; }"), "rejected",
                              "kernel defines global symbol _Z6helperf"),
    "extra_global_variable": (saxpy_variant(extra="float scratch[16];"), "rejected", "kernel defines global symbol scratch"),
    "extern_c_kernel_named_like_libc": (saxpy_variant(extra='extern "C" __global__ void fwrite_k(float *y) { y[0] = 1; }'),
                                        "rejected", 'kernels need C++ linkage, not extern "C"'),
    "defines_a_harness_symbol": (saxpy_variant(extra='extern "C" void ko_call(long n) {}'), "rejected", "global symbol ko_call"),
    "static_constructor": (saxpy_variant(extra="#include <stdlib.h>\nstatic float *grab = (float *)malloc(64);",
                                         launch="grab[0] = a; saxpy_kernel<<<1, 1>>>(n, a, x, y);"),
                           "rejected", "static constructors besides the CUDA registration"),
    "constructor_attribute": (saxpy_variant(extra="static volatile int armed;\n[[gnu::constructor]] static void early() { armed = 1; }",
                                            launch="if (armed) saxpy_kernel<<<1, 1>>>(n, a, x, y);"),
                              "rejected", "__attribute__((constructor)) is not allowed"),  # the text gate reads [[gnu::...]] too
    "atexit_handler": (saxpy_variant(extra="#include <stdlib.h>\nstatic void bye() {}", launch="atexit(bye);"), "rejected",
                       "exit handlers"),
    "device_reset": (saxpy_variant(launch="cudaDeviceReset();"), "rejected", "kernel references cudaDeviceReset"),
    "host_callback": (saxpy_variant(extra="static void cb(void *) {}", launch="cudaLaunchHostFunc(0, cb, 0);"), "rejected",
                      "kernel references cudaLaunchHostFunc"),
    "event_timer": (saxpy_variant(launch="cudaEvent_t e; float ms; cudaEventElapsedTime(&ms, e, e);"), "rejected",
                    "kernel references cudaEventElapsedTime"),
    "registration_macro": (saxpy_variant(extra="#define __cudaRegisterFunction(...) 0"), "rejected", "#define __cudaRegisterFunction"),
    "registration_name": (saxpy_variant(launch="extern void **__cudaFatCubinHandle; (void)__cudaFatCubinHandle;"), "rejected",
                          "uses __cudaFatCubinHandle"),
    "inline_ptx": (saxpy_variant(body=' asm volatile("trap;");'), "rejected", "inline assembly"),
    "device_printf": (saxpy_variant(extra="#include <cstdio>", body=' printf("result ok\\n");'), "rejected", "calls printf()"),
}


@needs_nvcc
@pytest.mark.parametrize("case", sorted(GATE_CASES))
def test_cuda_c_gates_reject(case: str, saxpy_ev: CudaCEvaluator) -> None:
    source, status, reason = GATE_CASES[case]
    r = evaluate(saxpy_ev, source)
    assert r.status == status and reason in r.reason, f"{r.status}: {r.reason}\n{r.log[-1500:]}"


@needs_nvcc
@pytest.mark.parametrize(("flags", "reason"), [(["-march=native"], "compiler flag '-march=native' is not allowed"),
                                               (["-Xcompiler=-fplugin=evil.so"], "is not allowed"),
                                               (["--use_fast_math"], "changes floating-point semantics"),
                                               (["--ftz=true"], "changes floating-point semantics")])
def test_cuda_c_flags_are_nvcc_optimization_flags_only(flags: list[str], reason: str, saxpy_ev: CudaCEvaluator) -> None:
    r = evaluate(saxpy_ev, saxpy_ev.task.baseline_source(), cflags=flags)
    assert r.status == "rejected" and reason in r.reason, r.reason


def test_a_missing_nvcc_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None if name == "nvcc" else real(name, *a, **k))
    with pytest.raises(ToolMissing, match=r"^nvcc not found on PATH: install it .* to evaluate cuda-c tasks$"):
        get_evaluator(load_task(SAXPY), get_sandbox("local"), EvalConfig(), tmp_path / "ev")


# ---------------------------------------------------------------- the binding (slow)
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_torch_extension_bindings_compile_against_torch_headers(tmp_path: Path) -> None:
    """Every torch-extension task's cpp_sources, as load_inline writes them (torch/extension.h first, the
    pybind11 module after), in one g++ -fsyntax-only run (~20-30 s)."""
    from torch.utils.cpp_extension import include_paths

    parts, defs = ["#include <torch/extension.h>"], []
    for d in TORCH_CUDA:
        source = (d / "solution.py").read_text()
        parts.append(module_string(source, "CPP_SRC"))
        tree = ast.parse(source)
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "load_inline"]
        functions = [k.value for c in calls for k in c.keywords if k.arg == "functions"]
        defs += [f'm.def("{e.value}", torch::wrap_pybind_function({e.value}), "{e.value}");'  # type: ignore[attr-defined]
                 for f in functions for e in f.elts]  # type: ignore[attr-defined]
    assert len(defs) == len(TORCH_CUDA)
    (tmp_path / "main.cpp").write_text("\n".join(parts) + "\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n" + "\n".join(defs) + "\n}\n")
    # torch's CPU wheels ship c10/cuda headers without the generated cuda_cmake_macros.h
    stub = tmp_path / "stub" / "c10" / "cuda" / "impl"
    stub.mkdir(parents=True)
    (stub / "cuda_cmake_macros.h").write_text("#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
    homes = [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda", str(Path(shutil.which("nvcc") or "/").resolve().parent.parent)]
    cuda_include = next((Path(h) / "include" for h in homes if h and (Path(h) / "include" / "cuda_runtime_api.h").is_file()), None)
    if cuda_include is None:
        pytest.skip("no CUDA toolkit headers (cuda_runtime_api.h) found")
    cmd = ["g++", "-fsyntax-only", "-std=c++20", "-w", "-DTORCH_EXTENSION_NAME=kernopt_bindings", "-DTORCH_API_INCLUDE_EXTENSION_H",
           *[f"-I{p}" for p in include_paths()], f"-I{sysconfig.get_paths()['include']}", f"-I{cuda_include}", f"-I{tmp_path / 'stub'}",
           "main.cpp"]
    p = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]


# ---------------------------------------------------------------- on a GPU
@pytest.fixture(scope="module")
def gpu_transpose(workroot: Path) -> Iterator[CudaCEvaluator]:
    ev = get_evaluator(load_task(CUDA_TASKS / "transpose"), get_sandbox("local"), EvalConfig(rounds=2), workroot / "gpu-transpose")
    assert isinstance(ev, CudaCEvaluator)
    yield ev
    ev.close()


TRANSPOSE_KERNEL = """
__global__ void tr(long rows, long cols, const float *in, float *out) {{
    long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= rows * cols) return;
    long i = idx / cols, j = idx % cols;
    {body}
}}
{extra}
extern "C" void launch_transpose(long rows, long cols, const float *in, float *out) {{
    {launch}
}}
"""
LAUNCH = "if (rows * cols > 0) tr<<<(unsigned)((rows * cols + 255) / 256), 256>>>(rows, cols, in, out);"


def transpose(body: str = "out[j * rows + i] = in[idx];", launch: str = LAUNCH, extra: str = "") -> str:
    return TRANSPOSE_KERNEL.format(body=body, launch=launch, extra=extra)


@pytest.mark.gpu
@needs_nvcc
def test_gpu_a_correct_kernel_is_verified_and_timed_on_the_device(gpu_transpose: CudaCEvaluator) -> None:
    gpu = gpu_transpose.gpu()
    assert gpu is not None and gpu_transpose.arch == gpu.arch
    r = evaluate(gpu_transpose, transpose())
    assert r.status == "ok", f"{r.status}: {r.reason}\n{r.log[-2000:]}"
    assert r.verification.device == gpu.name and r.timing is not None and r.timing.device == gpu.name
    assert r.resources and r.resources[0].arch == gpu.arch and r.verification.timed_outputs_checked


@pytest.mark.gpu
@needs_nvcc
@pytest.mark.parametrize(("body", "launch", "extra", "status", "reason"), [
    # hack 8: writes the output on the first call only; the device output is poisoned before every call
    ("out[j * rows + i] = in[idx];", "if (calls++ == 0) { " + LAUNCH + " }", "static int calls;", "wrong_answer", ""),
    # hack 7: never writes the output
    ("(void)in;", LAUNCH, "", "wrong_answer", ""),
    # hack 6: zeroes its device input after reading it (the driver downloads inputs for the checksum)
    ("out[j * rows + i] = in[idx]; ((float *)in)[idx] = 0.0f;", LAUNCH, "", "rejected", "modified its input"),
    # hack 12: leaves the work on a non-blocking stream; the driver's device synchronize is in the timed region
    ("out[j * rows + i] = in[idx];",
     "static cudaStream_t s; if (!s) cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);\n"
     "    if (rows * cols > 0) tr<<<(unsigned)((rows * cols + 255) / 256), 256, 0, s>>>(rows, cols, in, out);", "", "ok", ""),
    # a launch the device refuses is a runtime error with the CUDA error on stderr
    ("out[j * rows + i] = in[idx];", "tr<<<1, 4096>>>(rows, cols, in, out);", "", "runtime_error", ""),
])
def test_gpu_device_side_protections(body: str, launch: str, extra: str, status: str, reason: str,
                                     gpu_transpose: CudaCEvaluator) -> None:
    r = evaluate(gpu_transpose, transpose(body, launch, extra))
    assert r.status == status and reason in r.reason, f"{r.status}: {r.reason}\n{r.log[-2000:]}"
    if status == "runtime_error":  # CUDA 13.0 on an H100 says "invalid argument" for a 4096-thread block; older ones
        assert "CUDA error launching the kernel" in r.log and ("invalid configuration" in r.log or "invalid argument" in r.log), r.log
