/* Control: gemm, collapse(2) over (i, j), each writing its own C[i][j]. */
void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
#pragma omp parallel for collapse(2) schedule(static)
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++) {
            double s = 0.0;
            for (long k = 0; k < n; k++) s += a[i * n + k] * b[k * n + j];
            c[i * n + j] = s;
        }
}
