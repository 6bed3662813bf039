#include <stddef.h>
void f(int n, double *restrict x, double *restrict out)
{
    for (int i = 0; i < n; i++) {
        if ((size_t)i - 1 >= (size_t)n)   /* only at i == 0: (size_t)0 - 1 wraps */
            x[0] = 42.0;
        out[i] = x[0];
    }
}
