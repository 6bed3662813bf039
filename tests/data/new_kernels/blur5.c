/* A 2D 5-point stencil (not a built-in task): out = weighted average of each interior point and its four
 * neighbours on an n x n row-major grid; the boundary is copied. For tests of `kernopt task new`. */
void blur5(long n, const double *restrict in, double *restrict out) {
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++) {
            long k = i * n + j;
            if (i == 0 || j == 0 || i == n - 1 || j == n - 1)
                out[k] = in[k];
            else
                out[k] = 0.5 * in[k] + 0.125 * (in[k - 1] + in[k + 1] + in[k - n] + in[k + n]);
        }
}
