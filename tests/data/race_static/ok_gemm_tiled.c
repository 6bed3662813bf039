/* Control: tiled gemm, `parallel for` over row tiles; each tile writes its own rows of C. */
#define T 32

void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
#pragma omp parallel for schedule(static)
    for (long ii = 0; ii < n; ii += T) {
        for (long i = ii; i < ii + T; i++)
            for (long j = 0; j < n; j++)
                if (i < n) c[i * n + j] = 0.0;
        for (long kk = 0; kk < n; kk += T)
            for (long i = ii; i < ii + T; i++)
                for (long k = kk; k < kk + T; k++)
                    for (long j = 0; j < n; j++)
                        if (i < n && k < n) c[i * n + j] += a[i * n + k] * b[k * n + j];
    }
}
