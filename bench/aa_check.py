#!/usr/bin/env python3
"""A/A check: evaluate each task's own baseline as a candidate N times, under the full protocol.

Now part of bench/quality.py (parts `aa` and `overhead`: the spread of the A/A "speedups", how often
one was judged significant, the false-win count and rate with its Clopper-Pearson interval, and where
an evaluation's time goes); this name is kept for the commands in docs/results.md.

usage: python bench/aa_check.py [--repeats 20] [--tasks tasks/openmp/gemm tasks/mpi/dot ...] [--threshold 1.05]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from quality import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main(parts=["aa", "overhead"]))
