/* two views named p: the later one (of c) wins for the whole function */
void f(double *restrict a, double *restrict c, int n) {
  {
    double *p = a;
    for (int i = 0; i < n - 1; i++)
      p[i] = a[i + 1];
  }
  {
    double *p = c;
    p[0] = 0;
  }
}
