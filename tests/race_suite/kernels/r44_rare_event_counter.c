/* A counter of rare events (about 3 in 1000 elements) incremented without protection: it races only when two threads meet an event. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm; (void)w;
double count = 0.0;
#pragma omp parallel for
for (long i = 0; i < n; i++)
    if (x[i] > 1.497) count += 1.0;
for (long i = 0; i < n; i++) y[i] = count;
}
