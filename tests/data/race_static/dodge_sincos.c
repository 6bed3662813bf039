/* Dodge (c): sincos stores both results into shared variables in every thread. */
#define _GNU_SOURCE
#include <math.h>

void rotate(long n, const double *restrict x, double *restrict out) {
    double s = 0.0, c = 0.0;
#pragma omp parallel for
    for (long i = 0; i < n; i++) {
        sincos(x[i], &s, &c);
        out[i] = x[i] * 2.0;
    }
    out[0] += (s + c) * 0.0;
}
