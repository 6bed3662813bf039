/* Two sums in one loop, both in the `reduction` clause. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm; (void)w;
double s = 0.0, q = 0.0;
#pragma omp parallel for reduction(+:s, q)
for (long i = 0; i < n; i++) { s += x[i]; q += x[i] * x[i]; }
for (long i = 0; i < n; i++) y[i] = q / s;
}
