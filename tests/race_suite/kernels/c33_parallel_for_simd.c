/* `parallel for simd` on an elementwise loop, `simd reduction` inside a parallel reduction. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm;
double s = 0.0;
#pragma omp parallel for simd reduction(+:s)
for (long i = 0; i < n; i++) {
    y[i] = 2.0 * x[i] + 1.0;
    s += x[i];
}
for (long i = 0; i < n; i++) w[i] = s;
}
