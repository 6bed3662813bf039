#include <math.h>
#include <stdlib.h>
#include "kernopt.h"

void matchain(long n, const double *restrict a, const double *restrict b, const double *restrict c,
              double *restrict tmp, double *restrict d);

static double *a, *b, *c, *d, *tmp; /* tmp: work buffer, not compared */

int ko_setup(long n, ko_buf *bufs) {
    size_t count = (size_t)n * (size_t)n;
    free(a); free(b); free(c); free(d); free(tmp);
    a = malloc(count * sizeof *a);
    b = malloc(count * sizeof *b);
    c = malloc(count * sizeof *c);
    d = malloc(count * sizeof *d);
    tmp = malloc(count * sizeof *tmp);
    bufs[0] = (ko_buf){"a", KO_F64, KO_IN, count, a};
    bufs[1] = (ko_buf){"b", KO_F64, KO_IN, count, b};
    bufs[2] = (ko_buf){"c", KO_F64, KO_IN, count, c};
    bufs[3] = (ko_buf){"d", KO_F64, KO_OUT, count, d};
    return 4;
}

void ko_fill(long n, uint64_t seed) {
    uint64_t s = seed;
    for (long i = 0; i < n * n; i++) a[i] = ko_rng_uniform(&s, -1.0, 1.0);
    for (long i = 0; i < n * n; i++) b[i] = ko_rng_uniform(&s, -1.0, 1.0);
    for (long i = 0; i < n * n; i++) c[i] = ko_rng_uniform(&s, -1.0, 1.0);
    for (long i = 0; i < n * n; i++) tmp[i] = NAN; /* the kernel must not rely on old work contents */
}

void ko_call(long n) { matchain(n, a, b, c, tmp, d); }
