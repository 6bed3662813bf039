#define CLEAR(v, len) for (int i = 0; i < (len); i++) v[i] = 0.0

void f(int n, double *restrict a, double *restrict b)
{
    for (int i = 0; i < n - 1; i++) a[i + 1] = a[i] + 1.0;  CLEAR(b, n);
}
