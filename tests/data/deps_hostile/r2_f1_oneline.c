void kernel(int n, double *restrict a, double *restrict b) {
  for (int i = 1; i < n; i++) for (int j = 0; j < n; j++)
      a[i * n + j] = a[(i - 1) * n + j] + 1.0;
  for (int i = 0; i < n; i++)
    b[i] = 2.0 * b[i];
}
