#include <stdlib.h>
#include "kernopt.h"

void nbody(long n, const double *restrict pos, const double *restrict mass, double *restrict acc);

static double *pos, *mass, *acc;

int ko_setup(long n, ko_buf *bufs) {
    free(pos); free(mass); free(acc);
    pos = malloc((size_t)(3 * n) * sizeof *pos);
    mass = malloc((size_t)n * sizeof *mass);
    acc = malloc((size_t)(3 * n) * sizeof *acc);
    bufs[0] = (ko_buf){"pos", KO_F64, KO_IN, (size_t)(3 * n), pos};
    bufs[1] = (ko_buf){"mass", KO_F64, KO_IN, (size_t)n, mass};
    bufs[2] = (ko_buf){"acc", KO_F64, KO_OUT, (size_t)(3 * n), acc};
    return 3;
}

void ko_fill(long n, uint64_t seed) {
    uint64_t s = seed * 0x2545F4914F6CDD1DULL + (uint64_t)n;
    /* Bodies in the unit cube, masses summing to about 1. */
    for (long i = 0; i < 3 * n; i++) pos[i] = ko_rng_uniform(&s, 0.0, 1.0);
    for (long i = 0; i < n; i++) mass[i] = ko_rng_uniform(&s, 0.5, 1.5) / (double)n;
}

void ko_call(long n) { nbody(n, pos, mass, acc); }
