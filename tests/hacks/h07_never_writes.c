/* Hack 7: never writes the output. */
void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    (void)n; (void)a; (void)b; (void)c;
}
