/* Extra: #include through a macro, so the directive's text names no file. */
#define HOSTFILE "/etc/passwd"
#include HOSTFILE

void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    (void)n; (void)a; (void)b; (void)c;
}
