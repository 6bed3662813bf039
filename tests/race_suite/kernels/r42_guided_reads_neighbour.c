/* A `nowait` dynamic loop writes y; the next guided loop reads y[i+1], which another thread may still write. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm;
#pragma omp parallel
{
    #pragma omp for schedule(dynamic, 16) nowait
    for (long i = 0; i < n; i++) y[i] = exp(-x[i]);
    #pragma omp for schedule(guided)
    for (long i = 0; i < n - 1; i++) w[i] = y[i + 1] * x[i];
}
w[n - 1] = 0.0;
}
