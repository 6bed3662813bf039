/* Tasks write their own partial sums; `taskwait` before they are summed. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm;
long B = 100, nb = (n + B - 1) / B;
double s = 0.0;
#pragma omp parallel
#pragma omp single
{
    for (long k = 0; k < nb; k++) {
        #pragma omp task firstprivate(k)
        {
            double p = 0.0;
            for (long i = k * B; i < (k + 1) * B && i < n; i++) p += x[i];
            w[k] = p;
        }
    }
    #pragma omp taskwait
    for (long k = 0; k < nb; k++) s += w[k];
}
for (long i = 0; i < n; i++) y[i] = s;
}
