/* Three chained matrix products: E := A*B, F := C*D, G := E*F, sizes derived from n by ratios
 * (A ni x nk, B nk x nj, C nj x nm, D nm x nl, so E ni x nj, F nj x nl, G ni x nl), flat
 * row-major arrays. E and F are the kernel's scratch; G is the result.
 * Parallel as written over the outer two loops of each nest; the inner sums are reductions;
 * the first two products are independent of each other, the third needs both. */
void chain3_ef(long n, const double *restrict A, const double *restrict B, const double *restrict C,
               const double *restrict D, double *restrict E, double *restrict F, double *restrict G)
{
    long ni = n, nj = (7 * n) / 8 + 1, nk = (5 * n + 3) / 4, nl = (9 * n) / 8, nm = (3 * n) / 4 + 2;

    for (long i = 0; i < ni; i++)
        for (long j = 0; j < nj; j++) {
            E[i * nj + j] = 0.0;
            for (long k = 0; k < nk; k++)
                E[i * nj + j] += A[i * nk + k] * B[k * nj + j];
        }
    for (long j = 0; j < nj; j++)
        for (long l = 0; l < nl; l++) {
            F[j * nl + l] = 0.0;
            for (long m = 0; m < nm; m++)
                F[j * nl + l] += C[j * nm + m] * D[m * nl + l];
        }
    for (long i = 0; i < ni; i++)
        for (long l = 0; l < nl; l++) {
            G[i * nl + l] = 0.0;
            for (long j = 0; j < nj; j++)
                G[i * nl + l] += E[i * nj + j] * F[j * nl + l];
        }
}
