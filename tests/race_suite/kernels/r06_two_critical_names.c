/* Two updates of one sum under differently named critical sections (no mutual exclusion between them). */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm; (void)w;
double s = 0.0;
#pragma omp parallel for
for (long i = 0; i < n; i++) {
    if (bin[i] < 32) {
        #pragma omp critical(low)
        s += x[i];
    } else {
        #pragma omp critical(high)
        s -= x[i];
    }
}
for (long i = 0; i < n; i++) y[i] = s;
}
