#include <stdlib.h>
#include "kernopt.h"

void mvt(long n, const double *restrict a, const double *restrict y1, const double *restrict y2,
         double *restrict x1, double *restrict x2);

static double *a, *y1, *y2, *x1, *x2;

int ko_setup(long n, ko_buf *bufs) {
    size_t count = (size_t)n * (size_t)n;
    free(a); free(y1); free(y2); free(x1); free(x2);
    a = malloc(count * sizeof *a);
    y1 = malloc((size_t)n * sizeof *y1);
    y2 = malloc((size_t)n * sizeof *y2);
    x1 = malloc((size_t)n * sizeof *x1);
    x2 = malloc((size_t)n * sizeof *x2);
    bufs[0] = (ko_buf){"a", KO_F64, KO_IN, count, a};
    bufs[1] = (ko_buf){"y1", KO_F64, KO_IN, (size_t)n, y1};
    bufs[2] = (ko_buf){"y2", KO_F64, KO_IN, (size_t)n, y2};
    bufs[3] = (ko_buf){"x1", KO_F64, KO_OUT, (size_t)n, x1};
    bufs[4] = (ko_buf){"x2", KO_F64, KO_OUT, (size_t)n, x2};
    return 5;
}

void ko_fill(long n, uint64_t seed) {
    uint64_t s = seed;
    for (long i = 0; i < n * n; i++) a[i] = ko_rng_uniform(&s, -1.0, 1.0);
    for (long i = 0; i < n; i++) y1[i] = ko_rng_uniform(&s, -1.0, 1.0);
    for (long i = 0; i < n; i++) y2[i] = ko_rng_uniform(&s, -1.0, 1.0);
}

void ko_call(long n) { mvt(n, a, y1, y2, x1, x2); }
