#include <stdlib.h>
#include "kernopt.h"

void reduce(long n, const double *restrict x, const double *restrict y, double *restrict result);

static double *x, *y, *result;

int ko_setup(long n, ko_buf *bufs) {
    free(x); free(y); free(result);
    x = malloc((size_t)n * sizeof *x);
    y = malloc((size_t)n * sizeof *y);
    result = malloc(sizeof *result);
    bufs[0] = (ko_buf){"x", KO_F64, KO_IN, (size_t)n, x};
    bufs[1] = (ko_buf){"y", KO_F64, KO_IN, (size_t)n, y};
    bufs[2] = (ko_buf){"result", KO_F64, KO_OUT, 1, result};
    return 3;
}

void ko_fill(long n, uint64_t seed) {
    uint64_t s = seed;
    /* Positive terms: reordering the sum is harmless, losing partial sums is not. */
    for (long i = 0; i < n; i++) x[i] = ko_rng_uniform(&s, 0.5, 1.5);
    for (long i = 0; i < n; i++) y[i] = ko_rng_uniform(&s, 0.5, 1.5);
}

void ko_call(long n) { reduce(n, x, y, result); }
