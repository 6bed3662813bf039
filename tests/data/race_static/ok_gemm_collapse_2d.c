/* Control: gemm on variably modified 2-D arrays, collapse(2) over (i, j) writing C[i][j]. */
void gemm(long n, const double A[restrict n][n], const double B[restrict n][n], double C[restrict n][n]) {
#pragma omp parallel for collapse(2)
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++) {
            double s = 0.0;
            for (long k = 0; k < n; k++) s += A[i][k] * B[k][j];
            C[i][j] = s;
        }
}
