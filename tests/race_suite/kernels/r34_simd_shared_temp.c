/* `parallel for simd` with a shared lane temporary declared outside the loop. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm;
double t = 0.0;
#pragma omp parallel for simd
for (long i = 0; i < n; i++) {
    t = x[i] * x[i];
    y[i] = t + 1.0;
}
for (long i = 0; i < n; i++) w[i] = t;
}
