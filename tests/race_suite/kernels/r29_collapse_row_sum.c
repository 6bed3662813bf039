/* `collapse(2)` over a row-sum nest: one row's sum is split across threads. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm; (void)w;
long m = (long)sqrt((double)n);
for (long i = 0; i < n; i++) y[i] = 0.0;
#pragma omp parallel for collapse(2)
for (long i = 0; i < m; i++)
    for (long j = 0; j < m; j++) y[i] += x[i * m + j];
}
