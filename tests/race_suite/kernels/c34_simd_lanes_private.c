/* Outer parallel loop over blocks, inner `simd` over lanes with a private temporary. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm;
#pragma omp parallel for
for (long b = 0; b < n; b += 16) {
    long e = b + 16 < n ? b + 16 : n;
    #pragma omp simd
    for (long i = b; i < e; i++) {
        double t = x[i] * x[i];
        y[i] = t + 1.0;
        w[i] = t;
    }
}
}
