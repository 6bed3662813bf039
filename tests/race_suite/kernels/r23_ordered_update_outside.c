/* `ordered` loop whose carried update sits outside the ordered block. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm; (void)w;
double s = 0.0;
#pragma omp parallel for ordered schedule(static, 16)
for (long i = 0; i < n; i++) {
    s += x[i] * x[i];
    #pragma omp ordered
    y[i] = s;
}
}
