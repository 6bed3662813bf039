/* In-place LU factorisation without pivoting (Doolittle, row by row): on return the strict
 * lower triangle holds L (unit diagonal implied) and the upper triangle holds U, A = L*U.
 * The input is strictly diagonally dominant, so no pivoting is needed.
 * Not parallelizable as written over i: row i is computed from the finished rows k < i.
 * Within a row, the L part (j < i) depends on the row's earlier L entries; the U part
 * (j >= i) has independent columns. */
#define IDX(i, j) ((i) * n + (j))

void lu_rowwise(long n, double *restrict a)
{
    for (long i = 0; i < n; i++) {
        for (long j = 0; j < i; j++) {
            for (long k = 0; k < j; k++)
                a[IDX(i, j)] -= a[IDX(i, k)] * a[IDX(k, j)];
            a[IDX(i, j)] /= a[IDX(j, j)];
        }
        for (long j = i; j < n; j++)
            for (long k = 0; k < i; k++)
                a[IDX(i, j)] -= a[IDX(i, k)] * a[IDX(k, j)];
    }
}
