/* y[i/8] accumulated with `schedule(static, 4)`: two threads share each cell. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm; (void)w;
for (long i = 0; i < n; i++) y[i] = 0.0;
#pragma omp parallel for schedule(static, 4)
for (long i = 0; i < n; i++) y[i / 8] += x[i];
}
