/* Pairwise forces with Newton's third law: iteration i also updates f[j] for j > i, which other threads own. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm; (void)w;
long m = n < 256 ? n : 256;
for (long i = 0; i < n; i++) y[i] = 0.0;
#pragma omp parallel for schedule(dynamic, 8)
for (long i = 0; i < m; i++)
    for (long j = i + 1; j < m; j++) {
        double d = x[i] - x[j], f = d / (1e-3 + d * d);
        y[i] += f;
        y[j] -= f;
    }
}
