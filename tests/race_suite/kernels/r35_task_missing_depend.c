/* Producer tasks write blocks of y with `depend(out:)`; the consumer tasks have no depend clause. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm;
long B = 100;
#pragma omp parallel
#pragma omp single
for (long b = 0; b < n; b += B) {
    long e = b + B < n ? b + B : n;
    #pragma omp task depend(out: y[b]) firstprivate(b, e)
    for (long i = b; i < e; i++) y[i] = 2.0 * x[i];
    #pragma omp task firstprivate(b, e)
    for (long i = b; i < e; i++) w[i] = y[i] + 1.0;
}
}
