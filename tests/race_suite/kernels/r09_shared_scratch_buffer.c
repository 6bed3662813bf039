/* A scratch buffer meant per thread is one shared buffer (every thread writes w[0..7]). */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm;
#pragma omp parallel for
for (long i = 0; i < n; i++) {
    double *scratch = w;
    for (int k = 0; k < 8; k++) scratch[k] = x[(i + k) % n];
    double s = 0.0;
    for (int k = 0; k < 8; k++) s += scratch[k];
    y[i] = s;
}
}
