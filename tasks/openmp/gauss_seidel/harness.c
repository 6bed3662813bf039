#include <stdlib.h>
#include "kernopt.h"

void gauss_seidel(long n, double *restrict u, const double *restrict f);

static double *u, *f;

int ko_setup(long n, ko_buf *bufs) {
    size_t count = (size_t)n * (size_t)n;
    free(u); free(f);
    u = malloc(count * sizeof *u);
    f = malloc(count * sizeof *f);
    bufs[0] = (ko_buf){"u", KO_F64, KO_INOUT, count, u};
    bufs[1] = (ko_buf){"f", KO_F64, KO_IN, count, f};
    return 2;
}

void ko_fill(long n, uint64_t seed) {
    uint64_t s = seed;
    for (long i = 0; i < n * n; i++) u[i] = ko_rng_uniform(&s, -1.0, 1.0);
    for (long i = 0; i < n * n; i++) f[i] = ko_rng_uniform(&s, -0.1, 0.1);
}

void ko_call(long n) { gauss_seidel(n, u, f); }
