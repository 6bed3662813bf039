/* Tasks take the loop index `firstprivate` (the default for tasks). */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm; (void)w;
#pragma omp parallel
#pragma omp single
for (long k = 0; k < n; k += 50) {
    #pragma omp task firstprivate(k)
    for (long i = k; i < k + 50 && i < n; i++) y[i] = 2.0 * x[i];
}
}
