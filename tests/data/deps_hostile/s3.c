void f(double *restrict a, int n, int k) {
  for (int i = 0; i < n; i++) {
    { int k = n; a[i] = a[i] + k; }
    for (int j = 0; j < n; j++)
      a[i] += a[j + k];
  }
}
