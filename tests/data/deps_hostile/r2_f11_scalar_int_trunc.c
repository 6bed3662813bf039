void kernel(long n, long m, int *restrict c, const double *restrict a) {
  for (long i = 0; i < n; i++)
    for (long k = 0; k < m; k++)
      c[i] += a[i * m + k];
}
