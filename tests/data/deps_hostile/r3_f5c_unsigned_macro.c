#define ONE 1u
void f(int n, double *restrict x, double *restrict out)
{
    for (int i = 0; i < n; i++) {
        if (i - ONE >= (unsigned)n)
            x[0] = 42.0;
        out[i] = x[0];
    }
}
