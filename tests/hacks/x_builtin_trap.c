/* Extra: exits through __builtin_trap. */
void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    (void)a; (void)b; (void)c;
    if (n > 0) __builtin_trap();
}
