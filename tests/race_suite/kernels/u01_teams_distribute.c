/* Host `teams distribute parallel for` reduction. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm; (void)w;
double s = 0.0;
#pragma omp teams distribute parallel for reduction(+:s) num_teams(2)
for (long i = 0; i < n; i++) s += x[i];
for (long i = 0; i < n; i++) y[i] = s;
}
