void kernel(int n, double *restrict c, const double *restrict a) {
  for (int v = 0; v < n; v++)
    c[v] = 0.0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      c[i] += a[i * n + j];
}
