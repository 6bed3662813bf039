/* restrict members reached through two struct pointers that may be equal */
struct S { double *restrict lo; int n; };
void f(struct S *s, struct S *t, int n) {
  for (int i = 0; i < n - 1; i++)
    s->lo[i] = t->lo[i + 1];
}
