/* `for nowait` between two static loops of the same bounds reading the same index: the same thread owns both iterations (the OpenMP static-schedule guarantee). */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm;
#pragma omp parallel
{
    #pragma omp for nowait schedule(static)
    for (long i = 0; i < n; i++) y[i] = 2.0 * x[i];
    #pragma omp for schedule(static)
    for (long i = 0; i < n; i++) w[i] = y[i] + 1.0;
}
}
