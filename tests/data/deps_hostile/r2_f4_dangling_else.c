void kernel(int n, int m, double *restrict c, const double *restrict a) {
  for (int i = 0; i < n; i++) {
    if (i > 0)
      for (int k = 0; k < m; k++)
        c[i] += a[i * m + k];
    else
      c[i] = -1.0;
  }
}
