/* use before the declaration in the loop body refers to param k */
void f(double *restrict a, double *restrict b, int n, int k) {
  for (int i = 0; i < n; i++) {
    a[i] = a[i + k];
    int k = 0;
    b[i] = k;
  }
}
