#include <math.h>
#include <stdlib.h>
#include "kernopt.h"

#define NRHS 32

void trisolve(long n, const double *restrict l, const double *restrict b, double *restrict x);

static double *l, *b, *x;

int ko_setup(long n, ko_buf *bufs) {
    size_t count = (size_t)n * (size_t)n;
    free(l); free(b); free(x);
    l = malloc(count * sizeof *l);
    b = malloc(NRHS * (size_t)n * sizeof *b);
    x = malloc(NRHS * (size_t)n * sizeof *x);
    bufs[0] = (ko_buf){"l", KO_F64, KO_IN, count, l};
    bufs[1] = (ko_buf){"b", KO_F64, KO_IN, NRHS * (size_t)n, b};
    bufs[2] = (ko_buf){"x", KO_F64, KO_OUT, NRHS * (size_t)n, x};
    return 3;
}

void ko_fill(long n, uint64_t seed) {
    uint64_t s = seed;
    /* strictly diagonally dominant: off-diagonal |l| < 2/n, so each row's off-diagonal sum < 2 <= diagonal */
    for (long i = 0; i < n; i++) {
        for (long j = 0; j < n; j++) {
            if (j < i) l[i * n + j] = ko_rng_uniform(&s, -2.0, 2.0) / (double)n;
            else if (j == i) l[i * n + j] = ko_rng_uniform(&s, 2.0, 3.0);
            else l[i * n + j] = NAN; /* not part of the matrix */
        }
    }
    for (long i = 0; i < NRHS * n; i++) b[i] = ko_rng_uniform(&s, -1.0, 1.0);
}

void ko_call(long n) { trisolve(n, l, b, x); }
