/* an array declared in an inner block shadows param a there only */
void f(double *restrict a, int n) {
  for (int i = 0; i < n - 1; i++) {
    { double a[1]; a[0] = i; }
    a[i] = a[i + 1] * 0.5;
  }
}
