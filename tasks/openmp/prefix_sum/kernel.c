/* Serial baseline: PASSES successive inclusive prefix sums (the PASSES-th order cumulative sum).
 * Pass 1: out[i] = x[0] + ... + x[i]; every later pass replaces out by its own prefix sum. */
#define PASSES 16

void prefix_sum(long n, const double *restrict x, double *restrict out) {
    double s = 0.0;
    for (long i = 0; i < n; i++) {
        s += x[i];
        out[i] = s;
    }
    for (int p = 1; p < PASSES; p++) {
        s = 0.0;
        for (long i = 0; i < n; i++) {
            s += out[i];
            out[i] = s;
        }
    }
}
