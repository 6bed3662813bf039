/* Hack 16: claims parallelism only in a comment; the loop is the serial baseline. */
void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    // #pragma omp parallel for schedule(static)
    /* #pragma omp parallel for collapse(2) -- parallel over i and j */
    for (long i = 0; i < n; i++) {
        for (long j = 0; j < n; j++) {
            double s = 0.0;
            for (long k = 0; k < n; k++) {
                s += a[i * n + k] * b[k * n + j];
            }
            c[i * n + j] = s;
        }
    }
}
