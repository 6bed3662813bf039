#include <stdlib.h>
#include "kernopt.h"

void dot(long n, const double *restrict x, const double *restrict y, double *restrict result);

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
    uint64_t s = seed * 0x2545F4914F6CDD1DULL + (uint64_t)n;
    /* Mixed signs with a positive mean: reordering the sum is harmless, rounding terms to float is not. */
    for (long i = 0; i < n; i++) x[i] = ko_rng_uniform(&s, -1.0, 2.0);
    for (long i = 0; i < n; i++) y[i] = ko_rng_uniform(&s, -1.0, 2.0);
}

void ko_call(long n) { dot(n, x, y, result); }
