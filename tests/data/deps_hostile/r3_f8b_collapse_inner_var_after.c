int f(int n, int m, double *restrict a)
{
    int i, j;
    for (i = 0; i < n; i++)
        for (j = 0; j < m; j++)
            a[i * m + j] *= 2.0;
    return i * 1000 + j;   /* n * 1000 + m after the serial loops */
}
