/* Normalization with a reduction and the implied barrier before scaling. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm; (void)w;
double s = 0.0;
#pragma omp parallel
{
    #pragma omp for reduction(+:s)
    for (long i = 0; i < n; i++) s += x[i];
    #pragma omp for
    for (long i = 0; i < n; i++) y[i] = x[i] / s;
}
}
