/* `taskloop` over an in-place three-point stencil: neighbouring tasks read each other's cells. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm; (void)w;
for (long i = 0; i < n; i++) y[i] = x[i];
#pragma omp parallel
#pragma omp single
#pragma omp taskloop grainsize(100)
for (long i = 1; i < n - 1; i++) y[i] = (y[i - 1] + y[i + 1]) * 0.5;
}
