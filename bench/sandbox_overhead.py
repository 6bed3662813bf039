"""Sandbox overhead, docker vs local, measured side by side in one run.

Per step: host wall of one `run()` inside an evaluation's session minus the program's own time (a
tiny timer inside the sandbox forks, execs and waits around the command). For docker that is the
exec, the files in and out, the clean-up and the engine's process-list check; for local, the uid
switch, rlimits and the reaping. Steps: `true`, and one small_gemm driver run as the evaluator runs it.
Per session: the container's set-up and removal (docker), paid once per candidate evaluation.
Per candidate: whole evaluations of the small_gemm baseline (build, verify, race check, timing),
alternating between sandboxes; the number of sandboxed steps each one took is counted.

    python bench/sandbox_overhead.py [--calls 20] [--candidates 5] [--sandboxes docker local]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kernopt.config import EvalConfig  # noqa: E402
from kernopt.evaluators.c_family.evaluator import CFamilyEvaluator  # noqa: E402
from kernopt.optimize import baseline_candidate  # noqa: E402
from kernopt.sandbox import ExecResult, Limits, Sandbox, get_sandbox  # noqa: E402
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


class Counted:
    """A sandbox whose sessions count their steps (to report steps per candidate)."""

    def __init__(self, inner: Sandbox) -> None:
        self.inner, self.name, self.cpus, self.steps = inner, inner.name, inner.cpus, 0

    def run(self, command: list[str], workdir: Path, limits: Limits, env: dict[str, str] | None = None) -> ExecResult:
        self.steps += 1
        return self.inner.run(command, workdir, limits, env)

    @contextlib.contextmanager
    def session(self, root: Path) -> Iterator[Counted]:
        with self.inner.session(root) as s:
            counted = Counted(s)
            yield counted
            self.steps += counted.steps


def row(cols: list[str], widths: list[int]) -> str:
    return " ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(cols, widths, strict=True)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=20, help="steps of each command per sandbox")
    ap.add_argument("--candidates", type=int, default=5, help="whole evaluations per sandbox")
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
        setup: dict[str, list[float]] = {s: [] for s in sandboxes}
        for sname, sb in sandboxes.items():
            for k in range(5):  # session set-up and removal: a one-step session minus its step's host wall
                sroot = root / f"setup-{sname}-{k}"
                (sroot / "d").mkdir(mode=0o755, parents=True)
                t0 = time.perf_counter()
                with sb.session(sroot) as session:
                    session.run(["true"], sroot / "d", Limits(wall_s=60))  # docker: creates the container
                setup[sname].append(time.perf_counter() - t0)  # minus one step's cost, below
            sroot = root / f"session-{sname}"
            sroot.mkdir(mode=0o755)
            with sb.session(sroot) as session:
                for i in range(args.calls):
                    for cname, cmd in commands.items():
                        d = sroot / f"{i}-{cname.split()[0]}"
                        d.mkdir(mode=0o755)
                        shutil.copy(timer, d / "timeit")
                        shutil.copy(prog, d / "prog")
                        t1 = time.perf_counter()
                        r = session.run(["./timeit", *cmd], d, Limits(wall_s=60), {"OMP_NUM_THREADS": "1"})
                        host = time.perf_counter() - t1
                        inner = next((float(ln.split()[1]) for ln in r.stderr.splitlines() if ln.startswith("kernopt-inner-s ")), None)
                        if r.returncode != 0 or inner is None:
                            sys.exit(f"{sname} {cname}: failed ({r.returncode}): {r.stderr.strip()[-300:]}")
                        if cname != "true" and not (d / "result.jsonl").is_file():
                            sys.exit(f"{sname} {cname}: result.jsonl did not come back")
                        samples[sname, cname].append((host, inner))
                        shutil.rmtree(d)
        ev.close()
        w = [8, 18, 6, 10, 9, 10, 10]
        print("Per step, inside one session")
        print(row(["sandbox", "command", "steps", "host wall", "program", "overhead", "p90 overh."], w))
        per_step: dict[str, float] = {}
        for (sname, cname), xs in samples.items():
            over = sorted(h - p for h, p in xs)
            per_step[sname] = max(per_step.get(sname, 0.0), statistics.median(over))
            print(row([sname, cname, str(len(xs)), f"{statistics.median(h for h, _ in xs):.3f}s",
                       f"{statistics.median(p for _, p in xs):.3f}s", f"{statistics.median(over):.3f}s",
                       f"{over[int(0.9 * (len(over) - 1))]:.3f}s"], w))
        for sname in setup:  # a one-step session, minus what a step costs in a running session
            setup[sname] = [t - statistics.median(h for h, _ in samples[sname, "true"]) for t in setup[sname]]
        print("\nPer session (container set-up and removal, median of 5): " +
              ", ".join(f"{s} {statistics.median(v):.3f}s" for s, v in setup.items()))

        walls: dict[str, list[float]] = {s: [] for s in sandboxes}
        steps: dict[str, list[int]] = {s: [] for s in sandboxes}
        evs = {s: CFamilyEvaluator(task, Counted(sb), EvalConfig(), root / f"eval-{s}") for s, sb in sandboxes.items()}
        cand = baseline_candidate(task)
        try:
            for s, e in evs.items():  # warm-up: trusted objects and the baseline build, once per evaluator
                if e.evaluate(cand).status != "ok":
                    sys.exit(f"{s}: the baseline does not verify")
            for _ in range(args.candidates):
                for s, e in evs.items():
                    counter = e.sandbox
                    assert isinstance(counter, Counted)
                    before = counter.steps
                    t0 = time.perf_counter()
                    result = e.evaluate(cand)
                    walls[s].append(time.perf_counter() - t0)
                    steps[s].append(counter.steps - before)
                    if result.status != "ok":
                        sys.exit(f"{s}: evaluation failed: {result.reason}")
        finally:
            for e in evs.values():
                e.close()
        w2 = [8, 18, 6, 10, 12, 12]
        print("\nPer candidate: whole evaluations of the small_gemm baseline (build, verify, race check, timing)")
        print(row(["sandbox", "", "evals", "steps", "eval wall", "est. overh."], w2))
        for s in sandboxes:
            n = statistics.median(steps[s])
            est = statistics.median(setup[s]) + n * per_step[s]
            print(row([s, "", str(len(walls[s])), f"{n:.0f}", f"{statistics.median(walls[s]):.2f}s", f"{est:.2f}s"], w2))
        if {"docker", "local"} <= set(sandboxes):
            diff = statistics.median(walls["docker"]) - statistics.median(walls["local"])
            print(f"\ndocker − local, median evaluation wall: {diff:+.2f}s per candidate")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
