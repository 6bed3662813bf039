/* Scratch space per thread: w + 8 * thread number. */
#include <omp.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm;
#pragma omp parallel
{
    double *scratch = w + 8 * omp_get_thread_num();
    #pragma omp for
    for (long i = 0; i < n; i++) {
        for (int k = 0; k < 8; k++) scratch[k] = x[(i + k) % n];
        double s = 0.0;
        for (int k = 0; k < 8; k++) s += scratch[k];
        y[i] = s;
    }
}
}
