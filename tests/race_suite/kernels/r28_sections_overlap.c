/* Two sections fill the halves of y with an off-by-one overlap at the middle element. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm; (void)w;
long h = n / 2;
#pragma omp parallel sections
{
    #pragma omp section
    for (long i = 0; i <= h; i++) y[i] = 2.0 * x[i];
    #pragma omp section
    for (long i = h; i < n; i++) y[i] = 3.0 * x[i];
}
}
