#define BOTH(x, y) x; y
void f(double *restrict a, double *restrict b, int n) {
  for (int i = 0; i < n - 1; i++) {
    BOTH(a[i] = 1.0, // then copy
         b[i] = a[i + 1]);
  }
}
