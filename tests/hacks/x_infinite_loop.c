/* Extra: never returns. */
void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    volatile long spin = 0;
    (void)n; (void)a; (void)b; (void)c;
    for (;;) spin++;
}
