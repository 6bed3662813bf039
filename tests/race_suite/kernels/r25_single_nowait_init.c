/* `single nowait` initializes a table every thread then reads. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm;
#pragma omp parallel
{
    #pragma omp single nowait
    for (int k = 0; k < 64; k++) w[k] = sqrt((double)k);
    #pragma omp for
    for (long i = 0; i < n; i++) y[i] = x[i] * w[i % 64];
}
for (long i = 64; i < n; i++) w[i] = 0.0;
}
