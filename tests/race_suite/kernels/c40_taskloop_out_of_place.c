/* `taskloop` over an out-of-place stencil. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm;
#pragma omp parallel
#pragma omp single
{
    #pragma omp taskloop grainsize(100)
    for (long i = 0; i < n; i++) y[i] = x[i];
    #pragma omp taskloop grainsize(100)
    for (long i = 0; i < n; i++) w[i] = (i > 0 && i < n - 1) ? (y[i - 1] + y[i + 1]) * 0.5 : y[i];
}
}
