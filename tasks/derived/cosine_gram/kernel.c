/* Row normalisation, then the Gram matrix of the normalised rows (cosine similarities): A has nr = n
 * rows of nc = (7n)/4 + 3 entries (row-major); each row is scaled by the inverse of its Euclidean
 * norm into U (scratch; a zero row stays zero), then S[i][j] = U_i . U_j for j <= i (the lower
 * triangle of the nr x nr result; the strict upper triangle is set to 0).
 * Parallel as written over the rows in the normalisation nest and over i in the Gram nest
 * (unbalanced: row i has i + 1 entries); the c sums are reductions. */
#include <math.h>

void cosine_gram(long n, const double *restrict A, double *restrict U, double *restrict S)
{
    long nr = n, nc = (7 * n) / 4 + 3;

    for (long i = 0; i < nr; i++) {
        double ss = 0.0;
        for (long c = 0; c < nc; c++)
            ss += A[i * nc + c] * A[i * nc + c];
        double inv = ss > 0.0 ? 1.0 / sqrt(ss) : 0.0;
        for (long c = 0; c < nc; c++)
            U[i * nc + c] = A[i * nc + c] * inv;
    }
    for (long i = 0; i < nr; i++)
        for (long j = 0; j < nr; j++) {
            S[i * nr + j] = 0.0;
            if (j <= i)
                for (long c = 0; c < nc; c++)
                    S[i * nr + j] += U[i * nc + c] * U[j * nc + c];
        }
}
