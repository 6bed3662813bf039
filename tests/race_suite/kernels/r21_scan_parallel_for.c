/* Prefix sum with a plain `parallel for`: the loop-carried y[i-1] crosses chunk boundaries. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm; (void)w;
y[0] = x[0];
#pragma omp parallel for
for (long i = 1; i < n; i++) y[i] = y[i - 1] + x[i];
}
