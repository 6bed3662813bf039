#include <stdlib.h>
#include "kernopt.h"

#define STEPS 50

void stencil2d(long n, int steps, const double *restrict in, double *restrict out);

static double *in, *out;

int ko_setup(long n, ko_buf *bufs) {
    size_t count = (size_t)n * (size_t)n;
    free(in); free(out);
    in = malloc(count * sizeof *in);
    out = malloc(count * sizeof *out);
    bufs[0] = (ko_buf){"in", KO_F64, KO_IN, count, in};
    bufs[1] = (ko_buf){"out", KO_F64, KO_OUT, count, out};
    return 2;
}

void ko_fill(long n, uint64_t seed) {
    uint64_t s = seed * 0x2545F4914F6CDD1DULL + (uint64_t)n;
    for (long i = 0; i < n * n; i++) in[i] = ko_rng_uniform(&s, -1.0, 1.0);
}

void ko_call(long n) { stencil2d(n, STEPS, in, out); }
