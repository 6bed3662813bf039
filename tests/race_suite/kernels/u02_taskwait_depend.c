/* Tasks ordered by `depend`, then `taskwait depend(in:)` on the last block before reading it. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm;
long B = 100;
#pragma omp parallel
#pragma omp single
{
    for (long b = 0; b < n; b += B) {
        long e = b + B < n ? b + B : n;
        #pragma omp task depend(out: y[b]) firstprivate(b, e)
        for (long i = b; i < e; i++) y[i] = 2.0 * x[i];
    }
    #pragma omp taskwait depend(in: y[0])
    w[0] = y[0];
    #pragma omp taskwait
    for (long i = 1; i < n; i++) w[i] = y[i];
}
}
