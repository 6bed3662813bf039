#define AT(i) a[(i) + 1]
void f(double *restrict a, int n) {
  for (int i = 0; i < n; i++)
    AT(i) = a[i] * 0.5;
}
#undef AT
#define AT(i) a[i]
