/* The search flag read and written with `atomic read` / `atomic write`. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm; (void)w;
int found = 0;
#pragma omp parallel for
for (long i = 0; i < n; i++) {
    int f;
    #pragma omp atomic read
    f = found;
    if (!f && x[i] > 1.499) {
        #pragma omp atomic write
        found = 1;
    }
    y[i] = x[i];
}
y[0] = found;
}
