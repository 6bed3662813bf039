/* param k; a sibling block before the nest declares int k = 0 */
void f(double *restrict a, int n, int k) {
  { int k = 0; a[0] = k; }
  for (int i = 0; i < n; i++)
    a[i] = a[i + k];
}
