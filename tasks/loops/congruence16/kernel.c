/* Batched congruence transform of small matrices: C_b = A_b * M_b * A_b^T for nb independent
 * 16 x 16 blocks (each block row-major, blocks one after another). */
#define S 16

void congruence16(long nb, const double *restrict ap, const double *restrict mp, double *restrict cp)
{
    const double (*A)[S][S] = (const double (*)[S][S])ap;
    const double (*M)[S][S] = (const double (*)[S][S])mp;
    double (*C)[S][S] = (double (*)[S][S])cp;

    for (long b = 0; b < nb; b++) {
        double T[S][S];
        for (int i = 0; i < S; i++)
            for (int j = 0; j < S; j++) {
                T[i][j] = 0.0;
                for (int k = 0; k < S; k++)
                    T[i][j] += A[b][i][k] * M[b][k][j];
            }
        for (int i = 0; i < S; i++)
            for (int j = 0; j < S; j++) {
                C[b][i][j] = 0.0;
                for (int k = 0; k < S; k++)
                    C[b][i][j] += T[i][k] * A[b][j][k];
            }
    }
}
