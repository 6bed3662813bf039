/* In-place Cholesky factorisation A = L*L^T of a symmetric positive definite matrix, row by
 * row (the "bordered" form): row i of L from the finished rows j < i. Row-major n x n with a
 * padded leading dimension ld = n + n/4 + 1; only the lower triangle is read and written (the
 * strict upper triangle and the padding keep their input values).
 * Not parallelizable as written over i: row i needs the rows j < i. Within a row, each entry
 * L[i][j] needs the row's earlier entries (a true dependence along j); the k sums are reductions. */
#include <math.h>

void cholesky_rows(long n, double *restrict a)
{
    long ld = n + n / 4 + 1;

    for (long i = 0; i < n; i++) {
        for (long j = 0; j < i; j++) {
            for (long k = 0; k < j; k++)
                a[i * ld + j] -= a[i * ld + k] * a[j * ld + k];
            a[i * ld + j] /= a[j * ld + j];
        }
        for (long k = 0; k < i; k++)
            a[i * ld + i] -= a[i * ld + k] * a[i * ld + k];
        a[i * ld + i] = sqrt(a[i * ld + i]);
    }
}
