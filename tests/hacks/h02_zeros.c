/* Hack 2: returns zeros. */
void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    (void)a; (void)b;
    for (long i = 0; i < n * n; i++) c[i] = 0.0;
}
