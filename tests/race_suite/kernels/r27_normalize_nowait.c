/* Normalization: the atomic sum loop has `nowait`, so the scaling loop reads the sum while it is still being added to. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm; (void)w;
double s = 0.0;
#pragma omp parallel
{
    #pragma omp for nowait
    for (long i = 0; i < n; i++) {
        #pragma omp atomic
        s += x[i];
    }
    #pragma omp for
    for (long i = 0; i < n; i++) y[i] = x[i] / s;
}
}
