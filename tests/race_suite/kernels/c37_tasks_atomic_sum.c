/* Tasks add their partial sums into a shared sum atomically; the implicit barrier ends the region before it is read. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm; (void)w;
long B = 100;
double s = 0.0;
#pragma omp parallel
#pragma omp single
for (long k = 0; k < n; k += B) {
    #pragma omp task firstprivate(k)
    {
        double p = 0.0;
        for (long i = k; i < k + B && i < n; i++) p += x[i];
        #pragma omp atomic
        s += p;
    }
}
for (long i = 0; i < n; i++) y[i] = s;
}
