/* Scatter through a permutation: every element written once. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin;
#pragma omp parallel for
for (long i = 0; i < n; i++) y[perm[i]] = x[i] + (double)i;
for (long i = 0; i < n; i++) w[i] = y[i];
}
