/* Hand-written: the kernel takes a VLA pointer parameter (double (*)[n]), which `kernopt task new`
 * cannot read. The matrix is symmetric positive definite: a random symmetric matrix with entries
 * in [-1, 1) plus n + 1 on the diagonal (strictly diagonally dominant). The upper triangle holds
 * the same values as the lower one (a symmetric matrix), but the kernel reads and writes only j <= i. */
#include <stdlib.h>
#include "kernopt.h"

void cholesky_right(long n, double (*restrict a)[n]);

static double *a;

int ko_setup(long n, ko_buf *bufs) {
    size_t count = (size_t)n * (size_t)n;
    free(a);
    a = malloc(count * sizeof *a);
    if (!a) abort();
    bufs[0] = (ko_buf){"a", KO_F64, KO_INOUT, count, a};
    return 1;
}

void ko_fill(long n, uint64_t seed) {
    uint64_t s = seed;
    for (long i = 0; i < n; i++) {
        for (long j = 0; j < i; j++) {
            double v = ko_rng_uniform(&s, -1.0, 1.0);
            a[i * n + j] = v;
            a[j * n + i] = v;
        }
        a[i * n + i] = (double)n + ko_rng_uniform(&s, 1.0, 2.0);
    }
}

void ko_call(long n) { cholesky_right(n, (double (*)[n])a); }
