/* Row sums parallel over rows only, each with a private accumulator. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm; (void)w;
long m = (long)sqrt((double)n);
for (long i = 0; i < n; i++) y[i] = 0.0;
#pragma omp parallel for
for (long i = 0; i < m; i++) {
    double s = 0.0;
    for (long j = 0; j < m; j++) s += x[i * m + j];
    y[i] = s;
}
}
