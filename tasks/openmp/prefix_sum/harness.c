#include <stdlib.h>
#include "kernopt.h"

void prefix_sum(long n, const double *restrict x, double *restrict out);

static double *x, *out;

int ko_setup(long n, ko_buf *bufs) {
    free(x); free(out);
    x = malloc((size_t)n * sizeof *x);
    out = malloc((size_t)n * sizeof *out);
    bufs[0] = (ko_buf){"x", KO_F64, KO_IN, (size_t)n, x};
    bufs[1] = (ko_buf){"out", KO_F64, KO_OUT, (size_t)n, out};
    return 2;
}

void ko_fill(long n, uint64_t seed) {
    uint64_t s = seed;
    for (long i = 0; i < n; i++) x[i] = ko_rng_uniform(&s, 0.0, 1.0);
}

void ko_call(long n) { prefix_sum(n, x, out); }
