/* Tiled wavefront: tiles of one tile-diagonal in parallel, each tile swept serially. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm; (void)w;
long m = (long)sqrt((double)n), B = 8, T = (m - 1 + B - 1) / B;
for (long i = 0; i < n; i++) y[i] = x[i];
for (long d = 0; d <= 2 * (T - 1); d++) {
    #pragma omp parallel for schedule(dynamic)
    for (long ti = 0; ti < T; ti++) {
        long tj = d - ti;
        if (tj < 0 || tj >= T) continue;
        for (long i = 1 + ti * B; i < 1 + (ti + 1) * B && i < m; i++)
            for (long j = 1 + tj * B; j < 1 + (tj + 1) * B && j < m; j++)
                y[i * m + j] = 0.5 * (y[(i - 1) * m + j] + y[i * m + j - 1]);
    }
}
}
