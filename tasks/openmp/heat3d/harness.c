#include <math.h>
#include <stdlib.h>
#include "kernopt.h"

void heat3d(long n, double *restrict u, double *restrict work);

static double *u, *work; /* work: scratch grid, not compared */

int ko_setup(long n, ko_buf *bufs) {
    size_t count = (size_t)n * (size_t)n * (size_t)n;
    free(u); free(work);
    u = malloc(count * sizeof *u);
    work = malloc(count * sizeof *work);
    bufs[0] = (ko_buf){"u", KO_F64, KO_INOUT, count, u};
    return 1;
}

void ko_fill(long n, uint64_t seed) {
    uint64_t s = seed;
    for (long i = 0; i < n * n * n; i++) u[i] = ko_rng_uniform(&s, 0.0, 1.0);
    for (long i = 0; i < n * n * n; i++) work[i] = NAN; /* the kernel must not rely on old work contents */
}

void ko_call(long n) { heat3d(n, u, work); }
