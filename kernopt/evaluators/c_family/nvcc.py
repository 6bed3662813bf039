"""nvcc on machines with or without a GPU: compile CUDA device code and read what ptxas says about it.

`compile_cuda_sources` compiles device code only (`nvcc --cubin -Xptxas -v`): it needs no GPU and
runs nothing it built, so a CUDA candidate can be checked for compile errors and resource use
(registers, spills, shared memory) anywhere nvcc is installed. The command runs through the
caller's sandbox. Sources that use torch types get torch's include paths and are slow to compile
(~45 s against torch/extension.h): CUDA meant to be checked on a CPU machine should not include
torch headers, and keep the torch glue in load_inline's cpp_sources.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from kernopt.evaluators.base import tail
from kernopt.evaluators.result import KernelResources
from kernopt.sandbox import ExecResult

Runner = Callable[[list[str], Path, float], ExecResult]

# The flags torch.utils.cpp_extension gives every nvcc compile (COMMON_NVCC_FLAGS and its -std=c++20), so a source that
# compiles here compiles under load_inline too.
TORCH_NVCC_FLAGS = ["-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__", "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
                    "-D__CUDA_NO_HALF2_OPERATORS__", "--expt-relaxed-constexpr", "-std=c++20"]
_USES_TORCH = re.compile(r"\b(torch|at|c10)::|^\s*#\s*include\s*[<\"](torch|ATen|c10)/", re.M)

_ENTRY = re.compile(r"^ptxas info\s*: Compiling entry function '([^']+)' for '(sm_\w+)'", re.M)
_PROPS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"^ptxas info\s*: Used (\d+) registers(.*)$", re.M)
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[\d+\]")


class NvccOutcome(BaseModel):
    """What compiling CUDA sources gave: success, each kernel's resources, the first error, the log."""

    model_config = ConfigDict(extra="forbid")

    ok: bool
    resources: list[KernelResources] = Field(default_factory=list)
    error: str = Field("", description="One line: the first error nvcc or ptxas reported (empty when ok).")
    log: str = Field("", description="The commands and their output (tail).")


def nvcc_available() -> bool:
    """Whether nvcc is on this machine's PATH."""
    return shutil.which("nvcc") is not None


def uses_torch(source: str) -> bool:
    """Whether a CUDA source needs torch's headers (torch::/at::/c10:: names or includes of their headers)."""
    return bool(_USES_TORCH.search(source))


def demangle(names: list[str]) -> list[str]:
    """C++ names demangled with c++filt where it is installed (the names unchanged otherwise)."""
    exe = shutil.which("c++filt")
    if not exe or not names:
        return list(names)
    try:
        out = subprocess.run([exe], input="\n".join(names) + "\n", capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return list(names)
    lines = out.splitlines()
    return lines if len(lines) == len(names) else list(names)


def parse_ptxas(text: str, arch: str) -> list[KernelResources]:
    """Per-entry-function resources from `nvcc -Xptxas -v` output.

    Only kernels (ptxas "entry functions") are reported, in the order ptxas compiled them. When the
    text holds several architectures, the entries compiled for `arch` are returned (all of them if
    none was). Names are demangled where c++filt is available.
    """
    found: list[tuple[str, KernelResources]] = []
    matches = list(_ENTRY.finditer(text))
    for i, m in enumerate(matches):
        block = text[m.end() : matches[i + 1].start() if i + 1 < len(matches) else len(text)]
        res = KernelResources(name=m.group(1), arch=m.group(2))
        props = _PROPS.search(block)
        if props:
            res.stack_bytes, res.spill_stores, res.spill_loads = (int(g) for g in props.groups())
        used = _USED.search(block)
        if used:
            res.registers = int(used.group(1))
            rest = used.group(2)
            smem = _SMEM.search(rest)
            res.shared_bytes = int(smem.group(1)) if smem else 0
            res.constant_bytes = sum(int(c) for c in _CMEM.findall(rest))
        found.append((m.group(1), res))
    wanted = [r for _, r in found if r.arch == arch] or [r for _, r in found]
    for r, name in zip(wanted, demangle([r.name for r in wanted]), strict=True):
        r.name = name.removeprefix("void ") if name.startswith("void ") and "<" in name else name
    return wanted


def describe_resources(resources: list[KernelResources]) -> str:
    """One short clause per kernel: 'k: 24 registers, no spills, 0 B shared'."""
    parts = []
    for r in resources:
        name = r.name.split("(", 1)[0] or r.name
        spills = f"spills {r.spill_stores}/{r.spill_loads} B" if r.spill_stores or r.spill_loads else "no spills"
        parts.append(f"{name}: {r.registers} registers, {spills}, {r.shared_bytes} B shared")
    return "; ".join(parts)


def first_error(text: str) -> str:
    """The first line of compiler output that reports an error (one line), else the last line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if re.search(r"\berror\b", ln, re.I) and not ln.startswith("$ "):
            return ln[:300]
    return lines[-1][:300] if lines else ""


def torch_include_flags() -> list[str]:
    """-I flags for torch's headers and Python's, as this machine's torch installation has them."""
    import sysconfig

    from torch.utils.cpp_extension import include_paths

    paths = [*include_paths(), sysconfig.get_paths()["include"]]
    return [f"-I{p}" for p in paths]


def nvcc_command(source_name: str, arch: str, torch_includes: list[str] | None = None, extra: list[str] | None = None) -> list[str]:
    """The device-only compile of one source: a cubin for `arch` and ptxas's resource report."""
    cmd = ["nvcc", "--cubin", f"-arch={arch}", "-O3", "-Xptxas", "-v", "-include", "cuda_runtime.h", *TORCH_NVCC_FLAGS]
    if torch_includes is not None:
        cmd += [*torch_includes, "-DTORCH_EXTENSION_NAME=kernopt_check", "-DTORCH_API_INCLUDE_EXTENSION_H"]
    return [*cmd, *(extra or []), "-o", Path(source_name).with_suffix(".cubin").name, source_name]


def compile_cuda_sources(sources: list[str], arch: str, run: Runner, workdir: Path, timeout: float,
                         torch_includes: list[str] | None = None, extra_flags: list[str] | None = None) -> NvccOutcome:
    """Compile each CUDA source's device code for `arch` in `workdir` with `run` (one command per
    source, sharing `timeout`); resources of every kernel, or the first error.

    A source that uses torch types is compiled with torch's include paths (`torch_includes`, default:
    this machine's, see torch_include_flags); that takes tens of seconds, so give it a long timeout.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout
    resources: list[KernelResources] = []
    log: list[str] = []
    for i, source in enumerate(sources):
        name = f"cuda_source_{i}.cu"
        (workdir / name).write_text(source)
        includes = None
        if uses_torch(source):
            includes = torch_includes if torch_includes is not None else torch_include_flags()
        cmd = nvcc_command(name, arch, includes, extra_flags)
        left = deadline - time.monotonic()
        if left <= 0:
            return NvccOutcome(ok=False, resources=resources, error=f"nvcc timed out after {timeout:.0f}s", log="\n".join(log))
        r = run(cmd, workdir, left)
        out = (r.stdout + r.stderr).strip()
        log.append(f"$ {shlex.join(cmd)}\n{out}")
        if r.timed_out:
            return NvccOutcome(ok=False, resources=resources, error=f"nvcc timed out after {timeout:.0f}s on CUDA source {i + 1}",
                               log=tail("\n".join(log), 60))
        if r.returncode != 0:
            err = first_error(r.stderr + "\n" + r.stdout) or f"nvcc exited with code {r.returncode}"
            if r.returncode == 127 or "nvcc: not found" in err:
                err = "nvcc not found in the sandbox: install the CUDA toolkit"
            return NvccOutcome(ok=False, resources=resources, error=err, log=tail("\n".join(log), 60))
        resources += parse_ptxas(out, arch)
    return NvccOutcome(ok=True, resources=resources, log=tail("\n".join(log), 60))
