#define NEG_N -n
void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    long m = -NEG_N;   /* m == n */
    for (long i = 0; i < m; i++)
        for (long j = 0; j < m; j++)
            for (long k = 0; k < m; k++)
                c[i * m + j] += a[i * m + k] * b[k * m + j];
}
