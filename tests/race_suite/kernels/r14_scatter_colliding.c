/* Scatter through an index with repeats (bin): two iterations write one element. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)perm;
for (long i = 0; i < n; i++) y[i] = 0.0;
#pragma omp parallel for
for (long i = 0; i < n; i++) y[bin[i]] = x[i] + (double)i;
for (long i = 0; i < n; i++) w[i] = y[i];
}
