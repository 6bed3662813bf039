/* One OpenMP lock shared by every thread guards the bins. */
#include <omp.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)perm; (void)w;
omp_lock_t lock;
omp_init_lock(&lock);
for (int b = 0; b < 64; b++) y[b] = 0.0;
#pragma omp parallel for
for (long i = 0; i < n; i++) {
    omp_set_lock(&lock);
    y[bin[i]] += x[i];
    omp_unset_lock(&lock);
}
omp_destroy_lock(&lock);
for (long i = 64; i < n; i++) y[i] = 0.0;
}
