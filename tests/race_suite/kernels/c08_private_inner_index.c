/* 2-D loop nest with the inner index declared in the loop. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm; (void)w;
long m = (long)sqrt((double)n);
#pragma omp parallel for
for (long i = 0; i < m; i++)
    for (long j = 0; j < m; j++) y[i * m + j] = x[i * m + j] + x[j * m + i];
for (long i = m * m; i < n; i++) y[i] = 0.0;
}
