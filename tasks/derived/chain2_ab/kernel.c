/* Two chained matrix products sharing a temporary, sizes derived from n by ratios:
 * tmp := alpha*A*B, then D := tmp*C + beta*D (A ni x nk, B nk x nj, C nj x nl, D ni x nl),
 * flat row-major arrays with those strides. tmp is the kernel's scratch.
 * Parallel as written over i (and j, l) in both nests; the k and j sums are reductions. */
void chain2_ab(long n, double alpha, double beta, const double *restrict A, const double *restrict B,
               const double *restrict C, double *restrict D, double *restrict tmp)
{
    long ni = n, nj = (9 * n + 7) / 8, nk = (5 * n) / 4, nl = (3 * n) / 4 + 1;

    for (long i = 0; i < ni; i++)
        for (long j = 0; j < nj; j++) {
            tmp[i * nj + j] = 0.0;
            for (long k = 0; k < nk; k++)
                tmp[i * nj + j] += alpha * A[i * nk + k] * B[k * nj + j];
        }
    for (long i = 0; i < ni; i++)
        for (long l = 0; l < nl; l++) {
            D[i * nl + l] *= beta;
            for (long j = 0; j < nj; j++)
                D[i * nl + l] += tmp[i * nj + j] * C[j * nl + l];
        }
}
