/* initializer of a set-once local reads a param changed before the nest */
void f(double *restrict a, int n, int m) {
  int off = m;
  m = m + 1;
  for (int i = 0; i < n; i++)
    a[i + off] = a[i + m];
}
