/* Hack 7 (variant): writes only the first half of the output rows. */
void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    for (long i = 0; i < (n + 1) / 2; i++)
        for (long j = 0; j < n; j++) {
            double s = 0.0;
            for (long k = 0; k < n; k++) s += a[i * n + k] * b[k * n + j];
            c[i * n + j] = s;
        }
}
