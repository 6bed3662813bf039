"""The machine's roofs: `kernopt hw probe` measures memory bandwidth and peak FP64 rate inside the sandbox
(probe.py, probe.c), tasks declare their work ([roofline] in task.toml, expr.py), and every timed
result gets achieved GB/s, GFLOP/s and its distance from the bound (roofline.py). Nothing heavy is
imported here: task.py imports expr."""

from __future__ import annotations

import platform
from pathlib import Path


def cpu_model() -> str:
    """This machine's CPU model, as /proc/cpuinfo names it (x86 and Arm keys alike)."""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model", "Hardware", "cpu model") and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"
