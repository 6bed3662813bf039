/* static array declared in the loop body: one object for all iterations */
void f(const double *restrict a, double *restrict b, int n) {
  for (int i = 0; i < n; i++) {
    static double t[1];
    t[0] = a[i];
    b[i] = t[0] * 2.0;
  }
}
