/* Histogram bins incremented without protection. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)perm; (void)w;
for (int b = 0; b < 64; b++) y[b] = 0.0;
#pragma omp parallel for
for (long i = 0; i < n; i++) y[bin[i]] += x[i];
for (long i = 64; i < n; i++) y[i] = 0.0;
}
