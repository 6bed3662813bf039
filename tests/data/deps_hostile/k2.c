/* function-level shadowing: a later (inner-block) declaration wins */
void f(double *restrict a, int n) {
  int k = 1;
  { int k = 0; a[0] = k; }
  for (int i = 0; i < n; i++)
    a[i] = a[i + k];
}
