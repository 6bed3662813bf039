#include <stdlib.h>
#include "kernopt.h"

#define NBINS (16 * 32)

void histogram(long n, const double *restrict x, const double *restrict y, int64_t *restrict hist);

static double *x, *y;
static int64_t *hist;

int ko_setup(long n, ko_buf *bufs) {
    free(x); free(y); free(hist);
    x = malloc((size_t)n * sizeof *x);
    y = malloc((size_t)n * sizeof *y);
    hist = malloc(NBINS * sizeof *hist);
    bufs[0] = (ko_buf){"x", KO_F64, KO_IN, (size_t)n, x};
    bufs[1] = (ko_buf){"y", KO_F64, KO_IN, (size_t)n, y};
    bufs[2] = (ko_buf){"hist", KO_I64, KO_OUT, NBINS, hist};
    return 3;
}

void ko_fill(long n, uint64_t seed) {
    uint64_t s = seed;
    for (long i = 0; i < n; i++) {
        x[i] = ko_rng_uniform(&s, -1.0, 1.0);
        y[i] = ko_rng_uniform(&s, -1.0, 1.0);
    }
}

void ko_call(long n) { histogram(n, x, y, hist); }
