#include <stdlib.h>
#include "kernopt.h"

#define NBINS 1000

void histogram(long n, const double *restrict x, long nbins, const double *restrict edges, long *restrict counts);

static double *x, *edges;
static long *counts;

int ko_setup(long n, ko_buf *bufs) {
    free(x); free(edges); free(counts);
    x = malloc((size_t)n * sizeof *x);
    edges = malloc((NBINS + 1) * sizeof *edges);
    counts = malloc(NBINS * sizeof *counts);
    bufs[0] = (ko_buf){"x", KO_F64, KO_IN, (size_t)n, x};
    bufs[1] = (ko_buf){"edges", KO_F64, KO_IN, NBINS + 1, edges};
    bufs[2] = (ko_buf){"counts", KO_I64, KO_OUT, NBINS, counts};
    return 3;
}

void ko_fill(long n, uint64_t seed) {
    uint64_t s = seed * 0x2545F4914F6CDD1DULL + (uint64_t)n;
    /* Sorted, strictly increasing, non-uniform edges starting near -3. */
    double e = -3.0 + ko_rng_uniform(&s, 0.0, 0.01);
    for (int b = 0; b <= NBINS; b++) {
        edges[b] = e;
        e += ko_rng_uniform(&s, 0.0005, 0.011);
    }
    /* Roughly normal values (sum of three uniforms), some outside the edges; every 16th value sits
     * exactly on an edge to pin down the half-open bin rule. */
    for (long i = 0; i < n; i++) {
        double v = ko_rng_uniform(&s, -1.5, 1.5) + ko_rng_uniform(&s, -1.5, 1.5) + ko_rng_uniform(&s, -1.5, 1.5);
        if (i % 16 == 5) v = edges[ko_rng_next(&s) % (NBINS + 1)];
        x[i] = v;
    }
}

void ko_call(long n) { histogram(n, x, NBINS, edges, counts); }
