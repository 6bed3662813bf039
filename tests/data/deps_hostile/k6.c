/* global accumulator s; a nest-local s in an inner block shadows it there only */
double s;
void f(const double *restrict a, double *restrict b, int n) {
  for (int i = 0; i < n; i++) {
    { double s = a[i]; b[i] = s; }
    s += a[i];
  }
}
