/* Rank-k update of the lower triangle: C := beta*C + alpha*A*A^T, A is n x k (row-major),
 * C is n x n and only its lower triangle (j <= i) is touched. */
#define IDX(i, j) ((i) * n + (j))
#define AT(i, p) a[(i) * k + (p)]

void syrk_lower(long n, long k, double alpha, double beta, const double *restrict a, double *restrict c)
{
    for (long i = 0; i < n; i++) {
        for (long j = 0; j <= i; j++)
            c[IDX(i, j)] *= beta;
        for (long p = 0; p < k; p++)
            for (long j = 0; j <= i; j++)
                c[IDX(i, j)] += alpha * AT(i, p) * AT(j, p);
    }
}
