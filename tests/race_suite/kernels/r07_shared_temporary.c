/* A temporary declared before the parallel loop is shared by every thread. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm;
double t;
#pragma omp parallel for
for (long i = 0; i < n; i++) {
    t = 2.0 * x[i];
    y[i] = t + 1.0;
    w[i] = t * t;
}
}
