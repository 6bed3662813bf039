/* In-place transpose swapping the upper triangle only. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm; (void)w;
long m = (long)sqrt((double)n);
for (long i = 0; i < n; i++) y[i] = x[i];
#pragma omp parallel for schedule(dynamic, 2)
for (long i = 0; i < m; i++)
    for (long j = i + 1; j < m; j++) {
        double t = y[i * m + j];
        y[i * m + j] = y[j * m + i];
        y[j * m + i] = t;
    }
}
