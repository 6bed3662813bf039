/* Serial baseline (PolyBench heat-3d): TSTEPS time steps, each two out-of-place sweeps
 * u -> work -> u of the 7-point heat stencil on an n x n x n grid with a fixed boundary.
 * u: initial grid on entry, final grid on exit; work: n*n*n scratch (garbage on entry). */
#define TSTEPS 60

void heat3d(long n, double *restrict u, double *restrict work) {
    long nn = n * n;
    for (long i = 0; i < nn * n; i++) {
        work[i] = u[i];
    }
    for (int t = 0; t < TSTEPS; t++) {
        for (long i = 1; i < n - 1; i++) {
            for (long j = 1; j < n - 1; j++) {
                for (long k = 1; k < n - 1; k++) {
                    long p = i * nn + j * n + k;
                    work[p] = 0.125 * (u[p + nn] - 2.0 * u[p] + u[p - nn]) +
                              0.125 * (u[p + n] - 2.0 * u[p] + u[p - n]) +
                              0.125 * (u[p + 1] - 2.0 * u[p] + u[p - 1]) + u[p];
                }
            }
        }
        for (long i = 1; i < n - 1; i++) {
            for (long j = 1; j < n - 1; j++) {
                for (long k = 1; k < n - 1; k++) {
                    long p = i * nn + j * n + k;
                    u[p] = 0.125 * (work[p + nn] - 2.0 * work[p] + work[p - nn]) +
                           0.125 * (work[p + n] - 2.0 * work[p] + work[p - n]) +
                           0.125 * (work[p + 1] - 2.0 * work[p] + work[p - 1]) + work[p];
                }
            }
        }
    }
}
