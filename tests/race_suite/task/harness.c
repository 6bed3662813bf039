#include <stdlib.h>
#include "kernopt.h"

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w);

static double *x, *y, *w;
static int *bin, *perm;

int ko_setup(long n, ko_buf *bufs) {
    free(x); free(y); free(w); free(bin); free(perm);
    x = malloc((size_t)n * sizeof *x);
    y = malloc((size_t)n * sizeof *y);
    w = malloc((size_t)n * sizeof *w);
    bin = malloc((size_t)n * sizeof *bin);
    perm = malloc((size_t)n * sizeof *perm);
    bufs[0] = (ko_buf){"x", KO_F64, KO_IN, (size_t)n, x};
    bufs[1] = (ko_buf){"bin", KO_I32, KO_IN, (size_t)n, bin};
    bufs[2] = (ko_buf){"perm", KO_I32, KO_IN, (size_t)n, perm};
    bufs[3] = (ko_buf){"y", KO_F64, KO_OUT, (size_t)n, y};
    bufs[4] = (ko_buf){"w", KO_F64, KO_OUT, (size_t)n, w};
    return 5;
}

void ko_fill(long n, uint64_t seed) {
    uint64_t s = seed;
    for (long i = 0; i < n; i++) x[i] = ko_rng_uniform(&s, 0.5, 1.5);
    for (long i = 0; i < n; i++) bin[i] = (int)(ko_rng_next(&s) % 64);
    for (long i = 0; i < n; i++) perm[i] = (int)i;
    for (long i = n - 1; i > 0; i--) { /* Fisher-Yates */
        long j = (long)(ko_rng_next(&s) % (uint64_t)(i + 1));
        int t = perm[i]; perm[i] = perm[j]; perm[j] = t;
    }
}

void ko_call(long n) { kernel(n, x, bin, perm, y, w); }
