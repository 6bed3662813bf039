/* Stream compaction with `atomic capture` for the slot. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm;
long cnt = 0;
#pragma omp parallel for
for (long i = 0; i < n; i++) {
    if (x[i] > 1.0) {
        long pos;
        #pragma omp atomic capture
        pos = cnt++;
        y[pos] = x[i];
    }
}
for (long i = 0; i < n; i++) w[i] = (double)cnt;
}
