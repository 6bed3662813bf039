/* B := alpha * L * B in place. L is n x n lower triangular (only k <= i is read), B is n x m.
 * Rows are overwritten bottom-up so that row i still sees the ORIGINAL rows k < i.
 * Not parallelizable as written over i: row i reads rows k < i, which the iterations with a
 * smaller i overwrite, so running the i loop in parallel reads rows that may already be updated.
 * The j loop (columns of B) is independent. */
void trmm_lower_inplace(long n, long m, double alpha, const double *restrict lp, double *restrict bp)
{
    const double (*L)[n] = (const double (*)[n])lp;
    double (*B)[m] = (double (*)[m])bp;

    for (long i = n - 1; i >= 0; i--)
        for (long j = 0; j < m; j++) {
            B[i][j] *= L[i][i];
            for (long k = 0; k < i; k++)
                B[i][j] += L[i][k] * B[k][j];
            B[i][j] *= alpha;
        }
}
