/* Red-team control: an honestly optimized gemm (rows shared out by OpenMP, the i-k-j order so the
 * inner loop streams rows of b and c, blocked over k for cache reuse). Must stay ok and be
 * significantly faster than the serial baseline. */
void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    const long kb = 128;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) {
        double *restrict ci = c + i * n;
        for (long j = 0; j < n; j++) ci[j] = 0.0;
        for (long k0 = 0; k0 < n; k0 += kb) {
            long k1 = k0 + kb < n ? k0 + kb : n;
            for (long k = k0; k < k1; k++) {
                const double aik = a[i * n + k];
                const double *restrict bk = b + k * n;
                for (long j = 0; j < n; j++) ci[j] += aik * bk[j];
            }
        }
    }
}
