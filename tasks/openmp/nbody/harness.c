#include <stdlib.h>
#include "kernopt.h"

void nbody(long n, const double *restrict pos, const double *restrict mass, double *restrict acc,
           double *restrict pot);

static double *pos, *mass, *acc, *pot;

int ko_setup(long n, ko_buf *bufs) {
    free(pos); free(mass); free(acc); free(pot);
    pos = malloc(3 * (size_t)n * sizeof *pos);
    mass = malloc((size_t)n * sizeof *mass);
    acc = malloc(3 * (size_t)n * sizeof *acc);
    pot = malloc((size_t)n * sizeof *pot);
    bufs[0] = (ko_buf){"pos", KO_F64, KO_IN, 3 * (size_t)n, pos};
    bufs[1] = (ko_buf){"mass", KO_F64, KO_IN, (size_t)n, mass};
    bufs[2] = (ko_buf){"acc", KO_F64, KO_OUT, 3 * (size_t)n, acc};
    bufs[3] = (ko_buf){"pot", KO_F64, KO_OUT, (size_t)n, pot};
    return 4;
}

void ko_fill(long n, uint64_t seed) {
    uint64_t s = seed;
    for (long i = 0; i < 3 * n; i++) pos[i] = ko_rng_uniform(&s, -1.0, 1.0);
    for (long i = 0; i < n; i++) mass[i] = ko_rng_uniform(&s, 0.5, 1.5) / (double)n;
}

void ko_call(long n) { nbody(n, pos, mass, acc, pot); }
