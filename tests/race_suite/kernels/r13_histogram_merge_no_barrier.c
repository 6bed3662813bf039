/* Private histograms per thread in a shared table, merged bin by bin with a work-shared loop, but the fill loop has `nowait`: threads merge rows still being filled. */
#include <omp.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)perm; (void)w;
double part[64][64];
int nt = 1;
#pragma omp parallel
{
    int t = omp_get_thread_num();
    #pragma omp single
    nt = omp_get_num_threads();
    for (int b = 0; b < 64; b++) part[t][b] = 0.0;
    #pragma omp for nowait
    for (long i = 0; i < n; i++) part[t][bin[i]] += x[i];
    #pragma omp for
    for (int b = 0; b < 64; b++) {
        double s = 0.0;
        for (int k = 0; k < nt; k++) s += part[k][b];
        y[b] = s;
    }
}
for (long i = 64; i < n; i++) y[i] = 0.0;
}
