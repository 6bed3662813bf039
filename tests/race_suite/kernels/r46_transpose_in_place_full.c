/* In-place transpose swapping over the whole matrix: (i, j) and (j, i) are both swapped, by different threads. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm; (void)w;
long m = (long)sqrt((double)n);
for (long i = 0; i < n; i++) y[i] = x[i];
#pragma omp parallel for
for (long i = 0; i < m; i++)
    for (long j = 0; j < m; j++) {
        if (i == j) continue;
        double t = y[i * m + j];
        y[i * m + j] = y[j * m + i];
        y[j * m + i] = t;
    }
}
