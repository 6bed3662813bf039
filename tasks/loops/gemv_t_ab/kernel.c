/* y := beta*y + alpha * A^T x, A is n x n row-major. Written column by column of A:
 * each y[j] is accumulated in place while walking down column j (stride n). */
#define IDX(i, j) ((i) * n + (j))

void gemv_t_ab(long n, double alpha, double beta, const double *restrict A,
               const double *restrict x, double *restrict y)
{
    for (long j = 0; j < n; j++) {
        y[j] *= beta;
        for (long i = 0; i < n; i++)
            y[j] += alpha * A[IDX(i, j)] * x[i];
    }
}
