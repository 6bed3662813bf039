"""The static gate's rules for CUDA kernels (target cuda-c: kernel.cu compiled by nvcc).

An nvcc object carries machinery a C object never has: the device code (a fatbin in `.nv_fatbin`,
`.nvFatBinSegment`), a static constructor (`__sti____cudaRegisterAll`, the one `.init_array`
entry) that registers the fatbin and every kernel with the CUDA runtime and schedules its
unregistration with atexit, a host-side launch stub per `__global__` function, and references to
the runtime's launch internals. The gate allows exactly that machinery and a list of CUDA runtime
calls a launch function may make; everything else follows the C rules (no file, process, timer or
system-call access; no global definitions beyond the task's functions and the kernels' stubs).

The inputs are `nm -P kernel.o`, `readelf -SW -rW kernel.o` (sections and relocations) and
`objdump -dr kernel.o` (disassembly with relocations).
"""

from __future__ import annotations

import re

# Flags a cuda-c candidate may add to nvcc: optimization choices only.
ALLOWED_FLAG = re.compile(
    r"-O[0-3]|-Xptxas=-O[0-3]|--?maxrregcount=\d{1,3}|--?use_fast_math|--ftz=(true|false)|--prec-div=(true|false)"
    r"|--prec-sqrt=(true|false)|--fmad=(true|false)|--extra-device-vectorization|--restrict|-lineinfo|-Xptxas=-dlcm=(ca|cg)"
)
FAST_MATH = re.compile(r"use_fast_math|ftz=true|prec-div=false|prec-sqrt=false")

# Names of nvcc's generated registration code and stubs: a kernel that names them (or redefines them
# with a macro) could change what the generated code does.
_RESERVED = re.compile(
    r"__cuda\w*|__sti\w*|__device_stub\w*|__fatbin\w*|__fatDeviceText|fatbinData|__FATIDNAME\w*|__REGISTERFUNCNAME\w*"
    r"|__TO_STRING\w*|__device__shadow_var|__device__text_var|__host__shadow_var|__name__\w*|__device_fun|__device_var"
    r"|__text_var|__text__|__surf__|__pad__|_*__nv_dummy_param_ref|__nv_save_fatbinhandle\w*|__nv_init_managed_rt\w*|__nv_cudaEntity\w*"
    r"|__nv_fatbinhandle\w*|__nv_module_id|__NV_ATTR_UNUSED_FOR_LAUNCH|__CUDA_INCLUDE_COMPILER_INTERNAL_HEADERS__"
    r"|__UNDEF_CUDA\w*|__CUDA_INTERNAL_COMPILATION__"
)
_EXIT_HOOKS = {"atexit", "at_quick_exit", "on_exit"}
_MACRO = re.compile(r"^\s*#\s*(define|undef)\s+([A-Za-z_]\w*)", re.M)

# CUDA runtime calls a kernel's host code may make (memory, launches, streams, events without timing,
# occupancy and attribute queries, graphs by stream capture). Not: device reset/selection, IPC, host
# callbacks, profiler control, event timing, limits.
_RUNTIME = re.compile(
    r"^cuda(GetLastError|PeekAtLastError|GetErrorString|GetErrorName|Malloc|MallocAsync|MallocPitch|Malloc3D|MallocManaged"
    r"|Free|FreeAsync|Memset(2D|3D)?(Async)?|Memcpy(2D|3D)?(Async)?|Memcpy(To|From)Symbol(Async)?|MemPrefetchAsync|MemAdvise"
    r"|FuncSetAttribute|FuncGetAttributes|FuncSetCacheConfig|FuncSetSharedMemConfig|Occupancy\w+|GetDevice|GetDeviceCount"
    r"|GetDeviceProperties(_v2)?|DeviceGetAttribute|DeviceSynchronize|DeviceGetLimit|DriverGetVersion|RuntimeGetVersion"
    r"|Stream(Create|CreateWithFlags|CreateWithPriority|Destroy|Synchronize|WaitEvent|Query|BeginCapture|EndCapture)"
    r"|Event(Create|CreateWithFlags|Record|RecordWithFlags|Destroy|Synchronize|Query)"
    r"|LaunchKernel|LaunchKernelExC|LaunchCooperativeKernel|GetSymbolAddress|GetSymbolSize|GetFuncBySymbol"
    r"|Graph(Instantiate|InstantiateWithFlags|Launch|Upload|ExecDestroy|Destroy))(_v\d+|_ptsz|_ptds)?$"
)
_TYPEINFO = re.compile(r"^_ZT[ISV](St|NSt|N10__cxxabiv1|N9__gnu_cxx)\w+$")
# What `kernel<<<...>>>(...)` and the launch stubs reference.
_LAUNCH_INTERNALS = {"__cudaPushCallConfiguration", "__cudaPopCallConfiguration", "__cudaLaunchKernel", "__cudaLaunchKernel_ptsz",
                     "__cudaGetKernel", "__cudaLaunch"}
# Referenced only by nvcc's registration functions.
REGISTRATION = {"__cudaRegisterFatBinary", "__cudaRegisterFatBinaryEnd", "__cudaRegisterFunction", "__cudaRegisterVar",
                "__cudaRegisterManagedVar", "__cudaRegisterTexture", "__cudaRegisterSurface", "__cudaUnregisterFatBinary",
                "__cudaInitModule", "atexit"}
# nvcc's registration code: the static constructor first, then its local helpers (called directly at -O0).
_REGISTRATION_FUNCTIONS = ("_ZL24__sti____cudaRegisterAllv", "_ZL26__cudaUnregisterBinaryUtilv", "_ZL31__nv_cudaEntityRegisterCallbackPPv",
                           "_ZL37__nv_save_fatbinhandle_for_managed_rtPPv", "_ZL22____nv_dummy_param_refPv",
                           "_ZL32__nv_init_managed_rt_with_modulePPv")
# Host code that some CUDA library headers bring along and a kernel cannot have: a hint for the message.
_HEAVY_HEADERS = {"__cxa_atexit", "dlopen", "dlsym", "getenv", "_ZNSt8ios_base4InitC1Ev"}
# Mangled names in namespaces and kinds a kernel must not define (they could replace library code).
_RESERVED_MANGLED = re.compile(r"^_Z(St|NSt|NKSt|N9__gnu_cxx|N10__cxxabiv1|nw|na|dl|da|TV|TI|TS|TT|TH|TW)")
_FUNC_HEADER = re.compile(r"^[0-9a-f]+ <([^>]+)>:$")
_RELOC_LINE = re.compile(r"^\s+[0-9a-f]+: R_\w+\s+([^\s+-]+)")
_SECTION_HEADER = re.compile(r"^Disassembly of section (\S+):$")


def check_source_rules(code: str) -> str | None:
    """CUDA-only source rules on comment- and string-free code; None when it may be compiled."""
    for m in _MACRO.finditer(code):
        name = m.group(2)
        if re.match(r"_[A-Z_]", name) or name in _EXIT_HOOKS:
            return f"#{m.group(1)} {name} is not allowed in a kernel: reserved names belong to the compiler and runtime"
    for word in set(re.findall(r"[A-Za-z_]\w*", code)):
        if _RESERVED.fullmatch(word):
            return f"uses {word}: names of nvcc's generated registration code are not allowed in a kernel"
        if word in _EXIT_HOOKS:
            return f"uses {word}: exit handlers are not allowed in a kernel"
    return None


def allowed_reference(name: str) -> bool:
    """Whether a CUDA kernel object may reference `name` outside the registration code: the runtime
    calls above, the launch internals, and the C++ runtime's type information (headers that throw)."""
    return bool(_RUNTIME.match(name) or _TYPEINFO.match(name)) or name in _LAUNCH_INTERNALS


def _stub_kernel(name: str) -> str | None:
    """For nvcc's host launch stub of a __global__ function (`_Z<len>__device_stub__Z<kernel>...`, in a
    namespace `_ZN...<len>__device_stub__ZN...`), the kernel's mangled host symbol; else None."""
    m = re.search(r"(\d+)__device_stub__", name)
    if not m or not name.startswith("_Z"):
        return None
    digits = m.group(1)
    for k in range(1, len(digits) + 1):  # the length prefix may follow digits of an enclosing name
        length, start = int(digits[-k:]), m.end(1)
        ident = name[start : start + length]
        if len(ident) == length and ident.startswith("__device_stub__Z") and len(ident) > 16:
            return "_" + ident.removeprefix("__device_stub__")
    return None


def _functions(disassembly: str) -> dict[str, list[str]]:
    """function name -> its lines (instructions and relocations), from `objdump -dr`."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in disassembly.splitlines():
        m = _FUNC_HEADER.match(line)
        if m:
            current = out.setdefault(m.group(1), [])
        elif _SECTION_HEADER.match(line):
            current = None
        elif current is not None and line.strip():
            current.append(line)
    return out


def _registration_function_ok(name: str, lines: list[str]) -> str | None:
    """Every call or jump of a registration function goes to the runtime's registration API, to nvcc's
    other registration functions, or within itself; only the static constructor calls through a
    pointer (at -O0, the registration callback)."""
    for i, line in enumerate(lines):
        insn = line.split("\t")[-1]
        if not re.match(r"(call|jmp)\w*\s", insn):
            continue
        reloc = _RELOC_LINE.match(lines[i + 1]) if i + 1 < len(lines) else None
        if reloc:
            if reloc.group(1) not in REGISTRATION and reloc.group(1) not in _REGISTRATION_FUNCTIONS:
                return f"CUDA registration code calls {reloc.group(1)}"
            continue
        if "*" in insn:
            if name == _REGISTRATION_FUNCTIONS[0] and insn.startswith("call"):
                continue
            return "CUDA registration code calls through a pointer"
        target = re.search(r"<([^>+]+)(\+0x[0-9a-f]+)?>", insn)
        if not target or target.group(1).split(".")[0] not in (name, *_REGISTRATION_FUNCTIONS):
            return f"CUDA registration code calls {target.group(1) if target else 'an unknown address'}"
    return None


def _init_array_ok(sections: str, disassembly: str) -> str | None:
    """The object's only static constructor is nvcc's registration function."""
    names = re.findall(r"^\s*\[\s*\d+\]\s+(\S+)", sections, re.M)
    for n in names:
        if re.fullmatch(r"\.(fini_array|preinit_array|ctors|dtors)(\.\S*)?|\.init_array\.\S+", n):
            return "kernel has static constructors or destructors, which run outside the timed call"
    if ".init_array" not in names:
        return None
    tables = list(re.finditer(r"^Relocation section '\.rela\.init_array' at offset \S+ contains (\d+) entr", sections, re.M))
    m = tables[0] if len(tables) == 1 and names.count(".init_array") == 1 else None
    if not m or int(m.group(1)) != 1:
        return "kernel has static constructors besides the CUDA registration (C++ dynamic initializers or constructor attributes)"
    rest = sections[m.end():].splitlines()[2:3]
    target = rest[0].split()[4:] if rest else []
    if len(target) == 3 and target[1] == "+":
        symbol, addend = target[0], int(target[2], 16)
    elif len(target) == 1:
        symbol, addend = target[0], 0
    else:
        return "kernel's static constructor table could not be read"
    if symbol in _REGISTRATION_FUNCTIONS[:1] and addend == 0:
        return None
    section = None
    for line in disassembly.splitlines():
        s = _SECTION_HEADER.match(line)
        if s:
            section = s.group(1)
        f = re.match(r"^([0-9a-f]+) <([^>]+)>:$", line)
        if f and section == symbol and int(f.group(1), 16) == addend:
            if f.group(2) == _REGISTRATION_FUNCTIONS[0]:
                return None
            break
    return "kernel has a static constructor that is not the CUDA registration"


def check_object(functions: list[str], signature: str, nm_output: str, sections: str, disassembly: str,
                 c_allowed: object) -> str | None:
    """Why a compiled CUDA kernel object is rejected, or None. `c_allowed(name)` says whether the C
    rules allow referencing `name` (libm, memory, the C++ runtime's helpers)."""
    defined: list[tuple[str, str]] = []
    for line in nm_output.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind in ("U", "w"):
            if name in REGISTRATION:
                continue  # where it is referenced from is checked below
            if not (c_allowed(name) or allowed_reference(name)):  # type: ignore[operator]
                hint = (" (<cub/cub.cuh> and thrust bring host I/O and NVTX's library loader: include the block- or warp-level "
                        "cub headers, e.g. <cub/block/block_reduce.cuh>)") if name in _HEAVY_HEADERS else ""
                return f"kernel references {name}, which kernels may not use{hint}"
        elif kind == "i":
            return f"kernel defines {name} as an indirect function (ifunc), whose resolver runs before main"
        elif kind in ("T", "D", "B", "R", "C", "G", "S", "I", "A", "u", "W", "V"):
            defined.append((name, kind))
    stubs = {name: kernel for name, kind in defined if kind == "T" and (kernel := _stub_kernel(name))}
    for name, kind in defined:
        if name in functions or name in stubs or (kind == "T" and name in stubs.values()):
            if _RESERVED_MANGLED.match(name):
                return f"kernel defines {name}, a name reserved for the C++ library"
            continue
        # inline functions and variables of C++ headers (templates, libcu++'s unique objects)
        if kind in ("W", "V", "u") and (name == "DW.ref.__gxx_personality_v0" or (name.startswith("_Z") and not _RESERVED_MANGLED.match(name))):
            continue
        if kind in ("W", "V", "u"):
            return f"kernel defines weak symbol {name}, which could replace harness or library code"
        hint = "make helpers static" if name.startswith("_Z") else "kernels need C++ linkage, not extern \"C\"; make helpers static"
        return f"kernel defines global symbol {name}; it may define only {', '.join(functions)} and its __global__ kernels ({hint})"
    if ".gnu.lto_" in sections:
        return "kernel object holds link-time-optimization bytecode, which cannot be inspected"
    why = _init_array_ok(sections, disassembly)
    if why:
        return why
    # Registration symbols: referenced by nvcc's registration functions only, never from data.
    for m in re.finditer(r"^Relocation section '(\S+)'.*?(?=^Relocation section|\Z)", sections, re.M | re.S):
        if m.group(1).startswith(".rela.text"):
            continue
        for sym in REGISTRATION:
            if re.search(rf"\s{re.escape(sym)} [+-]", m.group(0)):
                return f"kernel refers to {sym} outside the CUDA registration code"
    for fn, lines in _functions(disassembly).items():
        base = fn.split(".")[0]
        if base in _REGISTRATION_FUNCTIONS:
            why = _registration_function_ok(base, lines)
            if why:
                return why
            continue
        for line in lines:
            r = _RELOC_LINE.match(line)
            if r and r.group(1) in REGISTRATION:
                return f"kernel calls {r.group(1)} outside the CUDA registration code"
    raw = re.search(r"\t(syscall|sysenter|int\s+\$0x80)\b", "\n".join(ln for ln in disassembly.splitlines() if not _RELOC_LINE.match(ln)))
    if raw:
        return f"kernel contains a raw {raw.group(1)} instruction"
    missing = [f for f in functions if not re.search(rf"^{re.escape(f)} [TW] ", nm_output, re.M)]
    if missing:
        return f"kernel does not define {missing[0]} (signature: {signature})"
    return None
