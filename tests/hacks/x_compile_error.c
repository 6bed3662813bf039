/* Extra: does not compile. */
void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    for (long i = 0; i < n * n; i++) c[i] = a[i] * b[i] + undeclared_scale;
}
