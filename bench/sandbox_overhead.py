"""Per-call overhead of each sandbox: host wall time of `Sandbox.run` minus the program's own time.

The program's own time is measured inside the sandbox by a tiny timer (fork, exec, wait around the
command), so what remains is the sandbox's cost: for docker, creating the volume and container,
moving the files in and out, the exec, and removing both; for local, the uid switch, rlimits and
the reaping. Commands: `true`, and one driver run of tests/data/small_gemm (build, verify at one
size, as the evaluator runs it). Calls alternate between sandboxes; medians over --calls.

    python bench/sandbox_overhead.py [--calls 20] [--sandboxes docker local]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kernopt.config import EvalConfig  # noqa: E402
from kernopt.evaluators.c_family import CFamilyEvaluator  # noqa: E402
from kernopt.sandbox import Limits, get_sandbox  # noqa: E402
from kernopt.task import load_task  # noqa: E402

TIMER = r"""#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
  struct timespec a, b; int st = 0;
  clock_gettime(CLOCK_MONOTONIC, &a);
  pid_t p = fork();
  if (p == 0) { execvp(argv[1], argv + 1); _exit(127); }
  waitpid(p, &st, 0);
  clock_gettime(CLOCK_MONOTONIC, &b);
  fprintf(stderr, "\nkernopt-inner-s %.6f\n", (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) * 1e-9);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--sandboxes", nargs="+", default=["docker", "local"])
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="kernopt-overhead-"))
    os.chmod(root, 0o755)
    try:
        timer = root / "timeit"
        (root / "timeit.c").write_text(TIMER)
        subprocess.run(["gcc", "-O2", "-o", str(timer), str(root / "timeit.c")], check=True)
        task = load_task(Path(__file__).resolve().parent.parent / "tests" / "data" / "small_gemm")
        ev = CFamilyEvaluator(task, get_sandbox("local"), EvalConfig(), root / "ev")
        prog = ev.baseline_binary()
        commands = {"true": ["true"],
                    "small_gemm driver": ["./prog", "--result", "result.jsonl", "--nonce", "0", "--out-dir", ".",
                                          "--sizes", "64", "--seeds", "1"]}
        sandboxes = {name: get_sandbox(name) for name in args.sandboxes}
        samples: dict[tuple[str, str], list[tuple[float, float]]] = {(s, c): [] for s in sandboxes for c in commands}
        for i in range(args.calls):
            for cname, cmd in commands.items():
                for sname, sb in sandboxes.items():
                    d = root / f"{sname}-{i}-{len(samples[sname, cname])}-{cname.split()[0]}"
                    d.mkdir(mode=0o755)
                    shutil.copy(timer, d / "timeit")
                    shutil.copy(prog, d / "prog")
                    t0 = time.perf_counter()
                    r = sb.run(["./timeit", *cmd], d, Limits(wall_s=60), {"OMP_NUM_THREADS": "1"})
                    host = time.perf_counter() - t0
                    inner = next((float(ln.split()[1]) for ln in r.stderr.splitlines() if ln.startswith("kernopt-inner-s ")), None)
                    if r.returncode != 0 or inner is None:
                        sys.exit(f"{sname} {cname}: failed ({r.returncode}): {r.stderr.strip()[-300:]}")
                    if cname != "true" and not (d / "result.jsonl").is_file():
                        sys.exit(f"{sname} {cname}: result.jsonl did not come back")
                    samples[sname, cname].append((host, inner))
                    shutil.rmtree(d)
        ev.close()
        print(f"{'sandbox':<8} {'command':<18} {'calls':>5} {'host wall':>10} {'program':>9} {'overhead':>9} {'p90 overh.':>10}")
        for (sname, cname), xs in samples.items():
            over = sorted(h - p for h, p in xs)
            print(f"{sname:<8} {cname:<18} {len(xs):>5} {statistics.median(h for h, _ in xs):>9.3f}s "
                  f"{statistics.median(p for _, p in xs):>8.3f}s {statistics.median(over):>8.3f}s {over[int(0.9 * (len(over) - 1))]:>9.3f}s")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
