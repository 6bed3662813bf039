/* Hack 9: calls the harness instead of computing (re-fills the inputs with a fixed seed). */
#include <stdint.h>

extern void ko_fill(long n, uint64_t seed);

void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    ko_fill(n, 1);
    for (long i = 0; i < n * n; i++) c[i] = a[i] + b[i];
}
