"""The machine's roofs: `kernopt hw probe` measures memory bandwidth and peak FP64 rate inside the sandbox
(probe.py, probe.c), tasks declare their work ([roofline] in task.toml, expr.py), and every timed
result gets achieved GB/s, GFLOP/s and its distance from the bound (roofline.py). Nothing heavy is
imported here: task.py imports expr."""
