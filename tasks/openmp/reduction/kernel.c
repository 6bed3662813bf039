/* Serial baseline: out[0] = sum over i of f(x[i]),
 * f(x) = sqrt(x) * exp(-0.5 * x) + 0.5 * sin(3 * x) + 0.5. */
#include <math.h>

void reduction(long n, const double *restrict x, double *restrict out) {
    double s = 0.0;
    for (long i = 0; i < n; i++) {
        double v = x[i];
        s += sqrt(v) * exp(-0.5 * v) + 0.5 * sin(3.0 * v) + 0.5;
    }
    out[0] = s;
}
