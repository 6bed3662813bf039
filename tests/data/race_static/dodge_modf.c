/* Dodge (b): every thread stores into the shared `ip` inside libm's modf, where the sanitizer does not look. */
#include <math.h>

void fracs(long n, const double *restrict x, double *restrict out) {
    double ip = 0.0;
#pragma omp parallel for
    for (long i = 0; i < n; i++) out[i] = modf(x[i], &ip);
    out[0] += ip * 0.0;
}
