/* Serial baseline: D = (A * B) * C, n x n, row-major. tmp is an n*n work buffer for A * B. */
void matchain(long n, const double *restrict a, const double *restrict b, const double *restrict c,
              double *restrict tmp, double *restrict d) {
    for (long i = 0; i < n; i++) {
        for (long j = 0; j < n; j++) {
            double s = 0.0;
            for (long k = 0; k < n; k++) {
                s += a[i * n + k] * b[k * n + j];
            }
            tmp[i * n + j] = s;
        }
    }
    for (long i = 0; i < n; i++) {
        for (long j = 0; j < n; j++) {
            double s = 0.0;
            for (long k = 0; k < n; k++) {
                s += tmp[i * n + k] * c[k * n + j];
            }
            d[i * n + j] = s;
        }
    }
}
