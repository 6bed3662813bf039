/* 1-D three-point smoothing done in place: iterations read neighbours other threads write. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm; (void)w;
for (long i = 0; i < n; i++) y[i] = x[i];
#pragma omp parallel for
for (long i = 1; i < n - 1; i++) y[i] = (y[i - 1] + y[i] + y[i + 1]) / 3.0;
}
