/* Extra: a compiler attack: #include of a host file (its text would show in the error log). */
#include "/etc/passwd"

void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    (void)n; (void)a; (void)b; (void)c;
}
