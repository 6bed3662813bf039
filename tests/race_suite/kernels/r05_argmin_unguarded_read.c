/* Argmin: the write is in a critical section, the comparison reads the shared best outside it. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm; (void)w;
double best = 1e300;
long where = 0;
#pragma omp parallel for
for (long i = 0; i < n; i++) {
    if (x[i] < best) {
        #pragma omp critical
        { if (x[i] < best) { best = x[i]; where = i; } }
    }
}
for (long i = 0; i < n; i++) y[i] = (double)where + best;
}
