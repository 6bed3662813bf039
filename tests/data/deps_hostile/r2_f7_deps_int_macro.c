void shift(int n, int D, double *restrict a) {
  for (int i = 0; i < n; i++)
    a[i + D] = a[i] + 1.0;
}
#ifdef SELF_TEST
#define D 0
int main(void) { double a[8] = {0}; shift(4, D, a); return 0; }
#endif
