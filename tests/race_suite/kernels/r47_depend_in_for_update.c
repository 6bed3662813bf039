/* Tasks accumulating into one cell declare it `depend(in:)`: readers are not ordered among themselves. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm;
long B = 100;
w[0] = 0.0;
#pragma omp parallel
#pragma omp single
for (long b = 0; b < n; b += B) {
    #pragma omp task depend(in: w[0]) firstprivate(b)
    for (long i = b; i < b + B && i < n; i++) w[0] += x[i];
}
for (long i = 0; i < n; i++) y[i] = w[0];
for (long i = 1; i < n; i++) w[i] = 0.0;
}
