void kernel(int n, double *restrict a, double *restrict b, double *restrict c) {
  double t = 0.0;
  for (int i = 0; i < n; i++) {
    t = a[i] * 2.0;
    b[i] = t;
  }
  for (int i = 0; i < n; i++)
    c[i] = c[i] + t;
}
