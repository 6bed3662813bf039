/* pure-looking call through a function-pointer parameter that shadows a pure file function */
static double g(double x) { return 2.0 * x; }
void f(double *restrict a, int n, double (*g)(double)) {
  for (int i = 0; i < n; i++)
    a[i] = g(a[i]);
}
