/* Blocked two-pass prefix sum: block sums, barrier, offsets by one thread, barrier, fix-up. */
#include <omp.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm;
#pragma omp parallel
{
    int t = omp_get_thread_num(), nt = omp_get_num_threads();
    long lo = n * t / nt, hi = n * (t + 1) / nt;
    double s = 0.0;
    for (long i = lo; i < hi; i++) { s += x[i]; y[i] = s; }
    w[t] = s;
    #pragma omp barrier
    #pragma omp single
    for (int k = 1; k < nt; k++) w[k] += w[k - 1];
    double off = t > 0 ? w[t - 1] : 0.0;
    for (long i = lo; i < hi; i++) y[i] += off;
}
}
