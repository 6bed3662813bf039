/* Per-thread partial sums combined by `single` after the loop's implied barrier. */
#include <omp.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm;
int nt = 1;
#pragma omp parallel
{
    int t = omp_get_thread_num();
    #pragma omp single
    nt = omp_get_num_threads();
    w[t] = 0.0;
    #pragma omp for schedule(static)
    for (long i = 0; i < n; i++) w[t] += x[i];
    #pragma omp single
    {
        double s = 0.0;
        for (int k = 0; k < nt; k++) s += w[k];
        y[0] = s;
    }
}
for (long i = 1; i < n; i++) y[i] = y[0];
}
