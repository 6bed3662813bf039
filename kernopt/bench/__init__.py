"""Batch benchmarks: many tasks optimized with one configuration, on this machine or a Ray cluster.

work.py      the work item (one task's optimization) shared by every executor, and the worker body
store.py     the bench directory: bench.json, results.jsonl (the commit log), runs/<slug>/, summaries
summary.py   per-task rows and suite figures (correctness, fast_p, geometric mean, spend); JSON + CSV
local.py     the local executor: one worker process per item, --jobs at a time, GPUs assigned exclusively
ray_executor.py  the same items as Ray tasks with resource requests (optional extra: kernopt[ray])
transfer.py  run directories between machines: archives, safe unpacking, paths re-pointed, swapped in whole
runner.py    the one loop: skip finished items, run the rest on an executor, record, summarize
"""
