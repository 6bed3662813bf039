/* `master` followed by an explicit barrier. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm;
#pragma omp parallel
{
    #pragma omp master
    for (int k = 0; k < 64; k++) w[k] = 1.0 / (1.0 + k);
    #pragma omp barrier
    #pragma omp for
    for (long i = 0; i < n; i++) y[i] = x[i] * w[i % 64];
}
for (long i = 64; i < n; i++) w[i] = 0.0;
}
