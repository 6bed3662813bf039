/* In-place LU factorisation without pivoting, right-looking (k-i-j): the matrix is n x n, stored
 * row-major with a padded leading dimension ld = (9n)/8 + 1 (the padding columns are left alone).
 * On return the strict lower triangle holds L (unit diagonal implied), the rest U.
 * Not parallelizable as written over k: step k updates the trailing block every later step reads.
 * Within a step, the rows i > k of the trailing update are independent (and so are its columns). */
void lu_padded(long n, double *restrict a)
{
    long ld = (9 * n) / 8 + 1;

    for (long k = 0; k < n; k++) {
        for (long i = k + 1; i < n; i++) {
            a[i * ld + k] /= a[k * ld + k];
            for (long j = k + 1; j < n; j++)
                a[i * ld + j] -= a[i * ld + k] * a[k * ld + j];
        }
    }
}
