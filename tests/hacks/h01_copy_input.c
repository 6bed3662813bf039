/* Hack 1: returns its input unchanged (copies a into c). */
#include <string.h>

void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    (void)b;
    memcpy(c, a, (size_t)n * (size_t)n * sizeof *c);
}
