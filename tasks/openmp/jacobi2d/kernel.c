/* Serial baseline: TSTEPS time steps of 2D Jacobi relaxation (PolyBench jacobi-2d form): each step
 * sweeps out -> work and then work -> out with the 5-point average, boundary fixed.
 * in: initial grid; out: grid after TSTEPS steps; work: n*n scratch (garbage on entry). */
#define TSTEPS 150

void jacobi2d(long n, const double *restrict in, double *restrict out, double *restrict work) {
    for (long i = 0; i < n * n; i++) {
        out[i] = in[i];
        work[i] = in[i];
    }
    for (int t = 0; t < TSTEPS; t++) {
        for (long i = 1; i < n - 1; i++) {
            for (long j = 1; j < n - 1; j++) {
                work[i * n + j] = 0.2 * (out[i * n + j] + out[(i - 1) * n + j] + out[(i + 1) * n + j] +
                                         out[i * n + j - 1] + out[i * n + j + 1]);
            }
        }
        for (long i = 1; i < n - 1; i++) {
            for (long j = 1; j < n - 1; j++) {
                out[i * n + j] = 0.2 * (work[i * n + j] + work[(i - 1) * n + j] + work[(i + 1) * n + j] +
                                        work[i * n + j - 1] + work[i * n + j + 1]);
            }
        }
    }
}
