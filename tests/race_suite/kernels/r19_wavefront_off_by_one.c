/* Wavefront whose diagonal index is off by one: cells of diagonals d and d+1 run together. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm; (void)w;
long m = (long)sqrt((double)n);
for (long i = 0; i < n; i++) y[i] = x[i];
for (long d = 2; d <= 2 * (m - 1); d += 2) {
    #pragma omp parallel for collapse(2)
    for (long e = d; e <= d + 1; e++)
        for (long i = 1; i < m; i++) {
            long j = e - i;
            if (j >= 1 && j < m) y[i * m + j] = 0.5 * (y[(i - 1) * m + j] + y[i * m + j - 1]);
        }
}
}
