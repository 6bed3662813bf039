/* Tasks capture the generating loop's index as `shared`: they read it while the loop increments it. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm; (void)w;
#pragma omp parallel
#pragma omp single
for (long k = 0; k < n; k += 50) {
    #pragma omp task shared(k)
    {
        long lo = k;
        for (long i = lo; i < lo + 50 && i < n; i++) y[i] = 2.0 * x[i];
    }
}
}
