/* A 3-index tensor contracted in place along its last index with a matrix:
 * X[r][q][:] := X[r][q][:] * W + b for every (r, q), X nr x nq x np, W np x np, sizes derived
 * from n by ratios, flat arrays. Each (r, q) row is computed into the scratch vector sum[],
 * then copied back over the row it was read from (so sum[] is written, then read, in every
 * (r, q) iteration).
 * Parallel as written over r and q only with a private copy of sum[] per thread (as written
 * every iteration shares it); within a row, p is parallel and s is a reduction. */
void contract_inplace(long n, double *restrict X, const double *restrict W, const double *restrict b,
                      double *restrict sum)
{
    long nr = n, nq = (3 * n) / 4 + 1, np = (5 * n + 3) / 4;

    for (long r = 0; r < nr; r++)
        for (long q = 0; q < nq; q++) {
            for (long p = 0; p < np; p++) {
                sum[p] = b[p];
                for (long s = 0; s < np; s++)
                    sum[p] += X[(r * nq + q) * np + s] * W[s * np + p];
            }
            for (long p = 0; p < np; p++)
                X[(r * nq + q) * np + p] = sum[p];
        }
}
