/* Hack 10: drops precision: float accumulation and float products. */
void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++) {
            float s = 0.0f;
            for (long k = 0; k < n; k++) s += (float)a[i * n + k] * (float)b[k * n + j];
            c[i * n + j] = s;
        }
}
