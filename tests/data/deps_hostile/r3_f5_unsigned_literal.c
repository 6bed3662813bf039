void f(int n, double *restrict x, double *restrict out)
{
    for (int i = 0; i < n; i++) {
        if (i - 1u >= (unsigned)n)   /* only at i == 0: 0 - 1u wraps */
            x[0] = 42.0;
        out[i] = x[0];
    }
}
