/* Control: tiled gemm with `min` bounds (the LLM fixtures' form): race-free, but outside what the dependence
 * analysis models (a call in a loop bound), so the checker says unknown. */
static long min_l(long x, long y) { return x < y ? x : y; }

void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    const long T = 32;
#pragma omp parallel for
    for (long ii = 0; ii < n; ii += T) {
        for (long i = ii; i < min_l(ii + T, n); i++)
            for (long j = 0; j < n; j++) c[i * n + j] = 0.0;
        for (long kk = 0; kk < n; kk += T)
            for (long i = ii; i < min_l(ii + T, n); i++)
                for (long k = kk; k < min_l(kk + T, n); k++) {
                    const double aik = a[i * n + k];
                    for (long j = 0; j < n; j++) c[i * n + j] += aik * b[k * n + j];
                }
    }
}
