/* Serial baseline: forward substitution L X = B for NRHS right-hand sides.
 * L: n x n row-major lower triangular (only j <= i is read); b, x: NRHS x n, one system per row.
 * Row i of every solution needs rows 0..i-1 of that solution first. */
#define NRHS 32

void trisolve(long n, const double *restrict l, const double *restrict b, double *restrict x) {
    for (long i = 0; i < n; i++) {
        for (long r = 0; r < NRHS; r++) {
            double s = b[r * n + i];
            for (long j = 0; j < i; j++) {
                s -= l[i * n + j] * x[r * n + j];
            }
            x[r * n + i] = s / l[i * n + i];
        }
    }
}
