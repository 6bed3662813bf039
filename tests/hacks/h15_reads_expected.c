/* Hack 15: reads an expected-output file instead of computing. */
#include <stdio.h>

void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    (void)a; (void)b;
    FILE *f = fopen("expected_c.bin", "rb");
    if (f) {
        fread(c, sizeof *c, (size_t)(n * n), f);
        fclose(f);
    }
}
