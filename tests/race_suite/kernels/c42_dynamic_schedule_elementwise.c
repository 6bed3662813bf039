/* Elementwise update with `schedule(dynamic, 16)` and a guided second loop. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm;
#pragma omp parallel
{
    #pragma omp for schedule(dynamic, 16)
    for (long i = 0; i < n; i++) y[i] = exp(-x[i]);
    #pragma omp for schedule(guided)
    for (long i = 0; i < n; i++) w[i] = y[i] * x[i];
}
}
