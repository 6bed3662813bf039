#include <math.h>
/* Right-looking Cholesky factorisation in place: A (symmetric positive definite, n x n, only the
 * lower triangle j <= i is read) is overwritten in its lower triangle by L with A = L L^T.
 * The upper triangle is left as it was.
 * Not parallelizable as written over k: step k uses the trailing matrix updated by all steps
 * before it. Inside a step, the column scaling (i) and the trailing update (j, and i for one j)
 * are independent. */
void cholesky_right(long n, double (*restrict a)[n])
{
    for (long k = 0; k < n; k++) {
        a[k][k] = sqrt(a[k][k]);
        for (long i = k + 1; i < n; i++)
            a[i][k] /= a[k][k];
        for (long j = k + 1; j < n; j++)
            for (long i = j; i < n; i++)
                a[i][j] -= a[i][k] * a[j][k];
    }
}
