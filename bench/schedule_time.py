"""Time schedule_moves (isl's scheduler and code generator, kernopt/tuner/schedule.py and codegen.py) on every kernel
of tasks/openmp and tasks/loops: how long the tuner spends on it, how many moves it gives, and the best one.

    .venv/bin/python bench/schedule_time.py [task dirs ...]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from kernopt.task import Task, load_task
from kernopt.tuner.cmacros import expand
from kernopt.tuner.policy import schedule_moves


def main(dirs: list[str]) -> None:
    tasks = [Path(d) for d in dirs] or sorted(p.parent for s in ("openmp", "loops") for p in Path("tasks", s).glob("*/task.toml"))
    total = 0.0
    for d in tasks:
        task = load_task(d)
        if not isinstance(task, Task) or task.language != "c":
            continue
        source = expand(task.baseline_source())
        t0 = time.perf_counter()
        moves = schedule_moves(task.kernel, source, {task.kernel: source}, task.uses_openmp)
        dt = time.perf_counter() - t0
        total += dt
        best = max(moves, key=lambda m: m.score).idea.removeprefix("isl schedule: ")[:110] if moves else "-"
        print(f"{d.parent.name}/{d.name:20s} {dt:6.2f} s  {len(moves):3d} moves  {best}", flush=True)
    print(f"total {total:.1f} s over {len(tasks)} tasks")


if __name__ == "__main__":
    main(sys.argv[1:])
