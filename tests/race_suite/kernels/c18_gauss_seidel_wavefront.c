/* 2-D Gauss-Seidel sweep as a wavefront: anti-diagonals in order, cells of one diagonal in parallel. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm; (void)w;
long m = (long)sqrt((double)n);
for (long i = 0; i < n; i++) y[i] = x[i];
for (long d = 2; d <= 2 * (m - 1); d++) {
    long lo = d - (m - 1) > 1 ? d - (m - 1) : 1, hi = d - 1 < m - 1 ? d - 1 : m - 1;
    #pragma omp parallel for
    for (long i = lo; i <= hi; i++) {
        long j = d - i;
        y[i * m + j] = 0.5 * (y[(i - 1) * m + j] + y[i * m + j - 1]);
    }
}
}
