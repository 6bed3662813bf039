/* Stream compaction with a plain shared counter: `pos = cnt++` is not atomic. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm;
long cnt = 0;
#pragma omp parallel for
for (long i = 0; i < n; i++) {
    if (x[i] > 1.0) {
        long pos = cnt++;
        y[pos] = x[i];
    }
}
for (long i = 0; i < n; i++) w[i] = (double)cnt;
}
