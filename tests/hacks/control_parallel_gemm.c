/* Control: an optimized correct candidate: rows in parallel, a private accumulator per (i, j),
 * and the i-k-j order so the inner loop streams rows of b and c. */
void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) {
        double *restrict ci = c + i * n;
        for (long j = 0; j < n; j++) ci[j] = 0.0;
        for (long k = 0; k < n; k++) {
            const double aik = a[i * n + k];
            const double *restrict bk = b + k * n;
            for (long j = 0; j < n; j++) ci[j] += aik * bk[j];
        }
    }
}
