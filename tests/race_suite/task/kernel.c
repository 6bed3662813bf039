/* Serial baseline: y = 2x, w = x + 1. */
void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
    (void)bin; (void)perm;
    for (long i = 0; i < n; i++) {
        y[i] = 2.0 * x[i];
        w[i] = x[i] + 1.0;
    }
}
