/* C += alpha * A * B, n x n, row-major. */
void gemm(long n, double alpha, const double *restrict a, const double *restrict b, double *restrict c) {
    /* unscaled variant, kept for reference:
    #define alpha 1.0
    */
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++)
            for (long k = 0; k < n; k++)
                c[i * n + j] += alpha * a[i * n + k] * b[k * n + j];
}
