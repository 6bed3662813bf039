/* Hack 14b: kills the harness itself. */
#include <signal.h>

void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    (void)n; (void)a; (void)b; (void)c;
    raise(SIGKILL);
}
