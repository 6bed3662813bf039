/* Hack 11c (variant): names LD_PRELOAD to make the next process load an interposer. */
#define LD_PRELOAD_LIB "./libfastclock.so"

static const char *LD_PRELOAD = LD_PRELOAD_LIB;

void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    (void)LD_PRELOAD;
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++) {
            double s = 0.0;
            for (long k = 0; k < n; k++) s += a[i * n + k] * b[k * n + j];
            c[i * n + j] = s;
        }
}
