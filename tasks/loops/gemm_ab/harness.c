/* Hand-written: the kernel takes VLA pointer parameters (double (*)[n]), which `kernopt task new`
 * cannot read. alpha and beta are drawn from the seed for every call. */
#include <stdlib.h>
#include "kernopt.h"

void gemm_ab(long n, double alpha, double beta, const double (*restrict A)[n],
             const double (*restrict B)[n], double (*restrict C)[n]);

static double *a, *b, *c;
static double alpha, beta;

int ko_setup(long n, ko_buf *bufs) {
    size_t count = (size_t)n * (size_t)n;
    free(a); free(b); free(c);
    a = malloc(count * sizeof *a);
    b = malloc(count * sizeof *b);
    c = malloc(count * sizeof *c);
    if (!a || !b || !c) abort();
    bufs[0] = (ko_buf){"A", KO_F64, KO_IN, count, a};
    bufs[1] = (ko_buf){"B", KO_F64, KO_IN, count, b};
    bufs[2] = (ko_buf){"C", KO_F64, KO_INOUT, count, c};
    return 3;
}

void ko_fill(long n, uint64_t seed) {
    uint64_t s = seed;
    ko_fill_uniform(a, n * n, ko_rng_next(&s), -1.0, 1.0);
    ko_fill_uniform(b, n * n, ko_rng_next(&s), -1.0, 1.0);
    ko_fill_uniform(c, n * n, ko_rng_next(&s), -1.0, 1.0);
    alpha = ko_rng_uniform(&s, 0.5, 1.5);
    beta = ko_rng_uniform(&s, 0.5, 1.5);
}

void ko_call(long n) {
    gemm_ab(n, alpha, beta, (const double (*)[n])a, (const double (*)[n])b, (double (*)[n])c);
}
