"""Input fill speed: kernopt.h's vectorized ko_fill_uniform against the element-by-element ko_rng_uniform loop
that harnesses used, both built as harnesses are (gcc -O3, no -march), timed side by side in one process.

    .venv/bin/python bench/fill_speed.py [--count 50000000] [--repeats 5]

Prints ns per element (the median of the repeats, after one untimed pass that takes the page faults) and the
ratio. Every call of a timing process fills its inputs afresh, outside the timed window.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from pathlib import Path

HEADER_DIR = Path(__file__).resolve().parent.parent / "kernopt" / "evaluators" / "c_family" / "c"
PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "kernopt.h"
int ko_setup(long n, ko_buf *b) { (void)n; (void)b; return 0; }
void ko_fill(long n, uint64_t s) { (void)n; (void)s; }
void ko_call(long n) { (void)n; }
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
static int cmp(const void *x, const void *y) { double a = *(const double *)x, b = *(const double *)y; return (a > b) - (a < b); }
int main(int argc, char **argv) {
    long n = atol(argv[1]); int reps = atoi(argv[2]);
    double *p = malloc((size_t)n * sizeof *p), loop[64], fast[64], sink = 0;
    uint64_t s = 1;
    for (long i = 0; i < n; i++) p[i] = ko_rng_uniform(&s, -1.0, 1.0);  /* page faults, untimed */
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        for (long i = 0; i < n; i++) p[i] = ko_rng_uniform(&s, -1.0, 1.0);
        double t1 = now();
        sink += p[n / 2];
        ko_fill_uniform(p, n, (uint64_t)r, -1.0, 1.0);
        double t2 = now();
        sink += p[n / 3];
        loop[r] = (t1 - t0) / n * 1e9; fast[r] = (t2 - t1) / n * 1e9;
    }
    qsort(loop, reps, sizeof *loop, cmp); qsort(fast, reps, sizeof *fast, cmp);
    printf("%.3f %.3f %g\n", loop[reps / 2], fast[reps / 2], sink);
    return 0;
}
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=50_000_000, help="doubles per fill")
    ap.add_argument("--repeats", type=int, default=5, help="timed fills of each kind (at most 64)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        src, exe = Path(d) / "fill.c", Path(d) / "fill"
        src.write_text(PROGRAM)
        subprocess.run(["gcc", "-O3", f"-I{HEADER_DIR}", str(src), "-o", str(exe)], check=True)
        out = subprocess.run([str(exe), str(args.count), str(min(args.repeats, 64))], check=True, capture_output=True,
                             text=True).stdout.split()
    loop, fast = float(out[0]), float(out[1])
    print(f"| fill ({args.count:,} doubles, gcc -O3) | ns per element | for 3e8 elements |")
    print("|---|---|---|")
    print(f"| ko_rng_uniform loop | {loop:.2f} | {loop * 0.3:.2f} s |")
    print(f"| ko_fill_uniform | {fast:.2f} | {fast * 0.3:.2f} s |")
    print(f"ko_fill_uniform is {loop / fast:.2f}x faster")


if __name__ == "__main__":
    main()
