/* `parallel for simd` on a recurrence (y[i] from y[i-2]): threads split the dependence chain. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm; (void)w;
y[0] = x[0]; y[1] = x[1];
#pragma omp parallel for simd
for (long i = 2; i < n; i++) y[i] = 0.5 * y[i - 2] + x[i];
}
