#ifndef USE_FLOAT
#define REAL double
#else
#define REAL float
#endif
#define HALF(f) ((f) * 0.5f)
#define SHOW(x) printf("x = %g\n", (double)(x))
void f(REAL *restrict a, int n) {
  for (int i = 0; i < n; i++)
    a[i] = HALF(a[i]);
  SHOW(a[0]);
  SHOW(  "two  spaces");
}
