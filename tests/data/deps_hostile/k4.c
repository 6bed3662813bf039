/* nest-local k in an inner block; use after the block refers to param k */
void f(double *restrict a, double *restrict b, int n, int k) {
  for (int i = 0; i < n; i++) {
    { int k = 0; b[i] = k; }
    a[i] = a[i + k];
  }
}
