/* Dodge (c): every thread copies into the shared `last` with memcpy. */
#include <string.h>

void copy_last(long n, const double *restrict x, double *restrict out) {
    double last = 0.0;
#pragma omp parallel for
    for (long i = 0; i < n; i++) {
        memcpy(&last, &x[i], sizeof last);
        out[i] = 2.0 * x[i];
    }
    out[0] += last * 0.0;
}
