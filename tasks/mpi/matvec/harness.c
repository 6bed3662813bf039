#include <stdlib.h>
#include "kernopt.h"

#define ITERS 12

void matvec(long n, int iters, const double *restrict a, const double *restrict x, double *restrict y);

static double *a, *x, *y;

int ko_setup(long n, ko_buf *bufs) {
    size_t count = (size_t)n * (size_t)n;
    free(a); free(x); free(y);
    a = malloc(count * sizeof *a);
    x = malloc((size_t)n * sizeof *x);
    y = malloc((size_t)n * sizeof *y);
    bufs[0] = (ko_buf){"a", KO_F64, KO_IN, count, a};
    bufs[1] = (ko_buf){"x", KO_F64, KO_IN, (size_t)n, x};
    bufs[2] = (ko_buf){"y", KO_F64, KO_OUT, (size_t)n, y};
    return 3;
}

void ko_fill(long n, uint64_t seed) {
    uint64_t s = seed * 0x2545F4914F6CDD1DULL + (uint64_t)n;
    for (long i = 0; i < n * n; i++) a[i] = ko_rng_uniform(&s, -1.0, 1.0);
    for (long i = 0; i < n; i++) x[i] = ko_rng_uniform(&s, -1.0, 1.0);
}

void ko_call(long n) { matvec(n, ITERS, a, x, y); }
