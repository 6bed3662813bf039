"""GPU checks for kernopt's GPU targets (the numbers in docs/gpu-results.md come from this script).

    python3 scripts/gpu_check.py env                       # the machine, and what the sandbox's Python sees
    python3 scripts/gpu_check.py evals TASK... --rounds 2  # each task's starting kernel, verified and timed
    python3 scripts/gpu_check.py table FILE.jsonl...       # a short table of evals / optimize results

`evals` evaluates every task's own solution.py (kernel.cu) through the real evaluator in the local
sandbox, as a candidate against itself (an A/A timing: the speedup should be ~1 and never
significant), and writes one JSON line per task: status, reason, the medians of the starting kernel,
eager PyTorch and torch.compile, the A/A speedup with its interval, ptxas resources, and the wall time
of each evaluator phase. Run it on a quiet machine for numbers worth reporting; scripts/gpu_check.sh
runs everything in order.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _sh(cmd: str) -> str:
    try:
        r = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=120)
        return (r.stdout + r.stderr).strip()
    except subprocess.TimeoutExpired:
        return "(timed out)"


def env() -> None:
    facts: dict[str, Any] = {"python": sys.executable, "uid": os.getuid(), "cwd": os.getcwd()}
    for name, cmd in [("nvidia_smi", "nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total,clocks.sm,clocks.max.sm,"
                                     "power.limit,persistence_mode,compute_mode --format=csv"),
                      ("nvcc", "nvcc --version | tail -2"), ("which", "which -a nvcc ninja nvidia-smi gcc g++ python3 2>&1"),
                      ("PATH", "echo $PATH"), ("LD_LIBRARY_PATH", "echo ${LD_LIBRARY_PATH:-}"), ("CUDA_HOME", "echo ${CUDA_HOME:-}"),
                      ("libcuda", "ldconfig -p | grep -E 'libcuda\\.so|libnvidia-ml' | head -5"),
                      ("dev_nodes", "ls -l /dev/nvidia* 2>&1 | head -8"),
                      ("perms", "ls -ld / /opt /opt/torch /opt/torch/.venv /opt/torch/.venv/bin/python3 /usr/local/cuda /tmp 2>&1; "
                                "readlink -f /opt/torch/.venv/bin/python3"),
                      ("repo_parents", f"p={REPO}; while [ \"$p\" != / ]; do ls -ld \"$p\"; p=$(dirname \"$p\"); done"),
                      ("cpu", "nproc; grep -m1 'model name' /proc/cpuinfo"), ("kernel", "uname -r")]:
        facts[name] = _sh(cmd)
    try:
        import torch

        facts["torch"] = torch.__version__
        facts["torch_cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            p = torch.cuda.get_device_properties(0)
            facts["device"] = {"name": p.name, "cap": f"{p.major}.{p.minor}", "sms": p.multi_processor_count,
                               "l2_mb": getattr(p, "L2_cache_size", 0) / 2**20, "mem_gib": round(p.total_memory / 2**30, 1)}
        import triton

        facts["triton"] = triton.__version__
    except Exception as e:  # noqa: BLE001 - a fact like any other
        facts["torch_error"] = f"{type(e).__name__}: {e}"
    # What the sandbox's private uid sees: the probe the torch evaluator runs, and the cuda-c GPU probe.
    from kernopt.config import EvalConfig
    from kernopt.evaluators import get_evaluator
    from kernopt.sandbox import get_sandbox
    from kernopt.task import load_task

    work = Path(tempfile.mkdtemp(prefix="kernopt-env-"))
    os.chmod(work, 0o755)
    try:
        for task in ("tasks/triton/vector_add", "tasks/cuda/saxpy"):
            ev: Any = get_evaluator(load_task(REPO / task), get_sandbox("local"), EvalConfig(), work / Path(task).name)
            try:
                with ev.session():
                    got = ev.device() if hasattr(ev, "device") else ev.gpu()
                facts[f"sandbox_sees[{task}]"] = repr(got)
            except Exception as e:  # noqa: BLE001
                facts[f"sandbox_sees[{task}]"] = f"{type(e).__name__}: {e}"
            finally:
                ev.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for k, v in facts.items():
        print(f"## {k}\n{v if isinstance(v, str) else json.dumps(v)}")


def _result_row(task_dir: str, r: Any, wall: float) -> dict[str, Any]:
    t = r.timing
    return {"task": task_dir, "status": r.status, "reason": r.reason, "flags": r.flags, "wall_s": round(wall, 1),
            "phase_s": {k: round(v, 1) for k, v in r.phase_s.items()},
            "device": r.verification.device, "shapes": len(r.verification.shapes) or len(r.verification.sizes),
            "seeds": r.verification.seeds, "max_abs_err": r.verification.max_abs_err,
            "base_ms": t.baseline_median_s * 1e3 if t else None, "cand_ms": t.candidate_median_s * 1e3 if t else None,
            "eager_ms": t.eager_median_s * 1e3 if t and t.eager_median_s else None,
            "compile_ms": t.compile_median_s * 1e3 if t and t.compile_median_s else None,
            "speedup": t.speedup if t else None, "ci": [t.ci_low, t.ci_high] if t else None, "p": t.p_value if t else None,
            "consistent": t.consistent if t else None, "timed_calls": len(t.candidate_s) if t else 0,
            "resources": [x.describe() for x in r.resources], "log": r.log[-1500:] if r.status != "ok" else ""}


def evals(tasks: list[str], rounds: int, out: Path | None, reps: int | None) -> None:
    from kernopt.candidate import Candidate
    from kernopt.config import EvalConfig
    from kernopt.evaluators import get_evaluator
    from kernopt.sandbox import get_sandbox
    from kernopt.task import load_task

    for task_dir in tasks:
        t0 = time.monotonic()
        work = Path(tempfile.mkdtemp(prefix="kernopt-gpucheck-"))
        os.chmod(work, 0o755)
        try:
            task = load_task(REPO / task_dir)
            ev = get_evaluator(task, get_sandbox("local"), EvalConfig(rounds=rounds, reps=reps), work)
            try:
                r = ev.evaluate(Candidate(files={task.kernel: task.baseline_source()}, author="gpu_check", idea="the starting kernel"))
            finally:
                ev.close()
            row = _result_row(task_dir, r, time.monotonic() - t0)
        except Exception as e:  # noqa: BLE001 - an infrastructure error is a row too
            row = {"task": task_dir, "status": "infra_error", "reason": f"{type(e).__name__}: {e}", "wall_s": round(time.monotonic() - t0, 1)}
        finally:
            shutil.rmtree(work, ignore_errors=True)
        _emit(row, out)


def times(tasks: list[str], out: Path | None) -> None:
    """Each task's starting kernel, eager PyTorch and torch.compile timed once, one fresh process each (the
    evaluator's own runner and time-mode protocol: fresh inputs per call, L2 flush, device events), under
    the host lock's exclusive hold. Cheaper than an A/A evaluation (3 processes instead of 2 x 4 + 2)."""
    import secrets

    from kernopt import placement
    from kernopt.config import EvalConfig
    from kernopt.evaluators import get_evaluator, stats
    from kernopt.sandbox import get_sandbox
    from kernopt.task import TorchTask, load_task

    for task_dir in tasks:
        t0 = time.monotonic()
        work = Path(tempfile.mkdtemp(prefix="kernopt-gpucheck-"))
        os.chmod(work, 0o755)
        row: dict[str, Any] = {"task": task_dir, "mode": "times"}
        try:
            task = load_task(REPO / task_dir)
            ev: Any = get_evaluator(task, get_sandbox("local"), EvalConfig(), work)
            try:
                with ev.session():
                    if isinstance(task, TorchTask):
                        dev = ev.device()
                        with placement.hold("shared"):
                            ext = ev.baseline_extension()
                        tt = task.timing
                        seeds = [secrets.randbits(62) for _ in range(tt.warmup + tt.reps)]
                        job = {"shape": dict(task.shapes.timing), "init_seed": secrets.randbits(62), "seeds": seeds, "rotate": tt.rotate,
                               "warmup": tt.warmup, "reps": tt.reps, "flush_l2": tt.flush_l2, "flush_bytes": max(256 << 20, 4 * dev.l2_bytes)}
                        with placement.hold("exclusive"):
                            for key, role in (("base", "baseline"), ("eager", "reference"), ("compile", "compile")):
                                src = task.baseline_source() if role == "baseline" else None
                                run, d, r = ev.run_role(role, "time", job, tt.timeout_s, source=src, ext=ext if role == "baseline" else None)
                                shutil.rmtree(d, ignore_errors=True)
                                ok = r.ok and run.complete and bool(run.timed_s())
                                row[f"{key}_ms"] = stats.median(run.timed_s()) * 1e3 if ok else None
                                row[f"{key}_process_s"] = round(r.wall_s, 2)
                                if not ok:
                                    row[f"{key}_error"] = (run.error or {}).get("error") or r.stderr[-500:]
                        row["status"] = "ok" if row.get("base_ms") is not None else "runtime_error"
                    else:
                        with placement.hold("shared"):
                            base = ev.baseline_binary()
                        seeds = [secrets.randbits(62) for _ in range(task.timing.warmup + task.timing.reps)]
                        with placement.hold("exclusive"):
                            run, d, r = ev.run_driver(ev._binary(base, None), [task.sizes.timing], seeds, True, task.timing.timeout_s,
                                                      warmup=task.timing.warmup, reps=task.timing.reps)
                        shutil.rmtree(d, ignore_errors=True)
                        ok = r.ok and run.complete
                        row["base_ms"] = stats.median([c.time for c in run.calls if not c.warmup]) * 1e3 if ok else None
                        row["base_process_s"] = round(r.wall_s, 2)
                        row["status"] = "ok" if ok else "runtime_error"
                        if not ok:
                            row["base_error"] = r.stderr[-500:]
            finally:
                ev.close()
        except Exception as e:  # noqa: BLE001 - an infrastructure error is a row too
            row.update(status="infra_error", reason=f"{type(e).__name__}: {e}")
        finally:
            shutil.rmtree(work, ignore_errors=True)
        row["wall_s"] = round(time.monotonic() - t0, 1)
        _emit(row, out)


KERNEL = """
import torch, triton, triton.language as tl

@triton.jit
def copy_kernel(x, y, n, B: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(y + i, tl.load(x + i, mask=i < n), mask=i < n)

x = torch.randn(1000, device="cuda")
y = torch.empty_like(x)
copy_kernel[(4,)](x, y, 1000, B=256)
torch.cuda.synchronize()
"""


def overhead() -> None:
    """Where a runner process's start-up goes: Python, torch, a CUDA context, a first Triton kernel with a
    fresh and with a warm cache (each a new process, as the evaluator starts them; as this user, not sandboxed)."""
    work = Path(tempfile.mkdtemp(prefix="kernopt-overhead-"))
    (work / "k.py").write_text(KERNEL)
    cache = work / "cache"
    cases = [("python -c pass", ["-c", "pass"]), ("import torch", ["-c", "import torch"]),
             ("import torch + CUDA context", ["-c", "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()"]),
             ("a first Triton kernel, fresh cache", [str(work / "k.py")]), ("the same kernel, warm cache", [str(work / "k.py")])]
    for name, args in cases:
        if "fresh" in name:
            shutil.rmtree(cache, ignore_errors=True)
        t = time.perf_counter()
        r = subprocess.run([sys.executable, "-I", "-B", *args], env={**os.environ, "TRITON_CACHE_DIR": str(cache), "HOME": str(work)},
                           capture_output=True, text=True)
        print(f"{name:40} {time.perf_counter() - t:6.2f} s  rc={r.returncode} {r.stderr[-200:].strip()}", flush=True)
    shutil.rmtree(work, ignore_errors=True)


def _emit(row: dict[str, Any], out: Path | None) -> None:
    line = json.dumps(row) + "\n"
    print(line, end="", flush=True)
    if out is not None:
        fd = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)  # one write per line: streams may share the file
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


def _ms(x: Any) -> str:
    return "-" if x is None else f"{x:.3f}" if x < 10 else f"{x:.1f}"


def table(files: list[str]) -> None:
    print(f"{'task':28} {'status':14} {'start ms':>9} {'eager ms':>9} {'compile ms':>10} {'A/A or best':>12} {'wall s':>7}")
    for f in files:
        p = Path(f)
        if not p.is_file():
            continue
        for line in p.read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if "task" not in row:  # an optimize that ended before its summary
                continue
            if "best_speedup" in row:  # an optimize --json summary
                ci = row.get("best_ci") or [None, None]
                sp = f"{row['best_speedup']:.2f}x" + (f" [{ci[0]:.2f},{ci[1]:.2f}]" if ci[0] else "")
                blank = ""
                print(f"{'opt ' + row.get('task', '?'):28} {row.get('best_status', '?'):14} {blank:>9} {blank:>9} {blank:>10} {sp:>12} "
                      f"{row.get('elapsed_s', 0):>7}")
                continue
            sp = "-" if row.get("speedup") is None else f"{row['speedup']:.2f}x"
            if row.get("mode") == "times":
                sp = "(times)"
            print(f"{row['task'].removeprefix('tasks/'):28} {row['status']:14} {_ms(row.get('base_ms')):>9} {_ms(row.get('eager_ms')):>9} "
                  f"{_ms(row.get('compile_ms')):>10} {sp:>12} {row.get('wall_s', 0):>7}")
            if row["status"] != "ok" or any(k.endswith("_error") for k in row):
                print(f"    {row.get('reason', '')[:300]} {[v[-200:] for k, v in row.items() if k.endswith('_error')]}")


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("env")
    sub.add_parser("overhead")
    e = sub.add_parser("evals")
    e.add_argument("tasks", nargs="+")
    e.add_argument("--rounds", type=int, default=2)
    e.add_argument("--reps", type=int, default=None)
    e.add_argument("--out", type=Path, default=None)
    m = sub.add_parser("times")
    m.add_argument("tasks", nargs="+")
    m.add_argument("--out", type=Path, default=None)
    t = sub.add_parser("table")
    t.add_argument("files", nargs="+")
    a = ap.parse_args()
    if a.cmd == "env":
        env()
    elif a.cmd == "overhead":
        overhead()
    elif a.cmd == "evals":
        evals(a.tasks, a.rounds, a.out, a.reps)
    elif a.cmd == "times":
        times(a.tasks, a.out)
    else:
        table(a.files)


if __name__ == "__main__":
    main()
