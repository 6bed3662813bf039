/* Atomic update of a shared sum, but a plain read of it in the same loop (an early-exit test). */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm; (void)w;
double s = 0.0;
#pragma omp parallel for
for (long i = 0; i < n; i++) {
    if (s < 1e300) {
        #pragma omp atomic
        s += x[i];
    }
}
for (long i = 0; i < n; i++) y[i] = s;
}
