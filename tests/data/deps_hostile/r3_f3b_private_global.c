double g_last;                              /* the harness (or the getter above the kernel) reads it */
double last_value(void) { return g_last; }

void f(int n, const double *restrict a, double *restrict b)
{
    for (int i = 0; i < n; i++) {
        g_last = a[i] * 2.0;
        b[i] = g_last;
    }
}
