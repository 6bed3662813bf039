#include <stdlib.h>
#include "kernopt.h"

void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c);

static double *a, *b, *c;

int ko_setup(long n, ko_buf *bufs) {
    size_t count = (size_t)n * (size_t)n;
    free(a); free(b); free(c);
    a = malloc(count * sizeof *a);
    b = malloc(count * sizeof *b);
    c = malloc(count * sizeof *c);
    bufs[0] = (ko_buf){"a", KO_F64, KO_IN, count, a};
    bufs[1] = (ko_buf){"b", KO_F64, KO_IN, count, b};
    bufs[2] = (ko_buf){"c", KO_F64, KO_OUT, count, c};
    return 3;
}

void ko_fill(long n, uint64_t seed) {
    uint64_t s = seed;
    for (long i = 0; i < n * n; i++) a[i] = ko_rng_uniform(&s, -1.0, 1.0);
    for (long i = 0; i < n * n; i++) b[i] = ko_rng_uniform(&s, -1.0, 1.0);
}

void ko_call(long n) { gemm(n, a, b, c); }
