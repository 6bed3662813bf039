void f(double *restrict y, const double *restrict a, int n) {
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      y[i + 1] += a[i * n + j];
}
