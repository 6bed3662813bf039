/* The same loop with `reduction(+:s)`. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm; (void)w;
double s = 0.0;
#pragma omp parallel for if(n > 4096) reduction(+:s)
for (long i = 0; i < n; i++) s += x[i];
for (long i = 0; i < n; i++) y[i] = s;
}
