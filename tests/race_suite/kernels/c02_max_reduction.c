/* Maximum with `reduction(max:m)`. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm; (void)w;
double m = 0.0;
#pragma omp parallel for schedule(static) reduction(max:m)
for (long i = 0; i < n; i++) m = fmax(m, x[i]);
for (long i = 0; i < n; i++) y[i] = x[i] / m;
}
