/* C := beta*C + alpha*A*B, square n x n, written the way a textbook gives the BLAS
 * definition: scale the element first, then accumulate into it, loops in i-j-k order. */
void gemm_ab(long n, double alpha, double beta, const double (*restrict A)[n],
             const double (*restrict B)[n], double (*restrict C)[n])
{
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++) {
            C[i][j] *= beta;
            for (long k = 0; k < n; k++)
                C[i][j] += alpha * A[i][k] * B[k][j];
        }
}
