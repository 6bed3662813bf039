/* Search with a shared `found` flag, written and read plainly; it is written only when some element exceeds 1.499 (in about 6 of 10 inputs of 1000). */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm; (void)w;
int found = 0;
#pragma omp parallel for
for (long i = 0; i < n; i++) {
    if (!found && x[i] > 1.499) found = 1;
    y[i] = x[i];
}
y[0] = found;
}
