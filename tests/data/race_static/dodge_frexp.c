/* Dodge (c): the shared exponent is stored by frexp in every thread. */
#include <math.h>

void mantissas(long n, const double *restrict x, double *restrict out) {
    int e = 0;
#pragma omp parallel for
    for (long i = 0; i < n; i++) out[i] = frexp(x[i], &e);
    out[0] += e * 0.0;
}
