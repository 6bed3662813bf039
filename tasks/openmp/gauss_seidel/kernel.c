/* Serial baseline: SWEEPS in-place lexicographic Gauss-Seidel sweeps for the 2D Poisson problem
 * on an n x n row-major grid with a fixed boundary:
 *   u[i][j] = 0.25 * (u[i-1][j] + u[i+1][j] + u[i][j-1] + u[i][j+1] - f[i][j])
 * Each update uses the already-updated values u[i-1][j] and u[i][j-1] of the same sweep. */
#define SWEEPS 20

void gauss_seidel(long n, double *restrict u, const double *restrict f) {
    for (int t = 0; t < SWEEPS; t++) {
        for (long i = 1; i < n - 1; i++) {
            for (long j = 1; j < n - 1; j++) {
                u[i * n + j] = 0.25 * (u[(i - 1) * n + j] + u[(i + 1) * n + j] + u[i * n + j - 1] +
                                       u[i * n + j + 1] - f[i * n + j]);
            }
        }
    }
}
