void kernel(long n, long m, double *restrict c, const double *restrict a, long *restrict last) {
  long i, k;
  for (i = 0; i < n; i++)
    for (k = 0; k < m; k++)
      c[i] += a[i * m + k];
  last[0] = k;   /* 0 when m <= 0 */
}
