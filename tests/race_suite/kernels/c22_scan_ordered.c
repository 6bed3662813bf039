/* Prefix sum with an `ordered` region for the carried sum. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm; (void)w;
double s = 0.0;
#pragma omp parallel for ordered schedule(static, 16)
for (long i = 0; i < n; i++) {
    double v = x[i] * x[i];
    #pragma omp ordered
    { s += v; y[i] = s; }
}
}
