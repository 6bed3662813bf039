/* Jacobi sweeps with the implied barrier between update and copy-back. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm;
for (long i = 0; i < n; i++) y[i] = x[i];
#pragma omp parallel
for (int it = 0; it < 4; it++) {
    #pragma omp for
    for (long i = 1; i < n - 1; i++) w[i] = 0.5 * (y[i - 1] + y[i + 1]);
    #pragma omp for
    for (long i = 1; i < n - 1; i++) y[i] = w[i];
}
w[0] = y[0]; w[n - 1] = y[n - 1];
}
