#define SCALE 2.0 /* the factor
                     applied to a */
void f(double *restrict a, int n) {
  for (int i = 0; i < n; i++)
    a[i] = SCALE * a[i];
}
