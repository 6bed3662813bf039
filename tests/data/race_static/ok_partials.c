/* Control: per-thread partial sums indexed by omp_get_thread_num(), combined after the region. */
#include <omp.h>

void reduce(long n, const double *restrict x, double *restrict out) {
    double part[256];
    int used = 1;
#pragma omp parallel num_threads(8)
    {
        int t = omp_get_thread_num();
        part[t] = 0.0;
#pragma omp for schedule(static)
        for (long i = 0; i < n; i++) part[t] += x[i];
#pragma omp single
        used = omp_get_num_threads();
    }
    double total = 0.0;
    for (int t = 0; t < used; t++) total += part[t];
    *out = total;
}
