#include <math.h>
#include <stdlib.h>
#include "kernopt.h"

void jacobi2d(long n, const double *restrict in, double *restrict out, double *restrict work);

static double *in, *out, *work; /* work: scratch grid, not compared */

int ko_setup(long n, ko_buf *bufs) {
    size_t count = (size_t)n * (size_t)n;
    free(in); free(out); free(work);
    in = malloc(count * sizeof *in);
    out = malloc(count * sizeof *out);
    work = malloc(count * sizeof *work);
    bufs[0] = (ko_buf){"in", KO_F64, KO_IN, count, in};
    bufs[1] = (ko_buf){"out", KO_F64, KO_OUT, count, out};
    return 2;
}

void ko_fill(long n, uint64_t seed) {
    uint64_t s = seed;
    for (long i = 0; i < n * n; i++) in[i] = ko_rng_uniform(&s, 0.0, 1.0);
    for (long i = 0; i < n * n; i++) work[i] = NAN; /* the kernel must not rely on old work contents */
}

void ko_call(long n) { jacobi2d(n, in, out, work); }
