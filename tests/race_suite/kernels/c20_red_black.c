/* Red-black relaxation coloured by (i + j) parity. */
#include <math.h>

void kernel(long n, const double *restrict x, const int *restrict bin, const int *restrict perm, double *restrict y,
            double *restrict w) {
(void)bin; (void)perm; (void)w;
long m = (long)sqrt((double)n);
for (long i = 0; i < n; i++) y[i] = x[i];
for (int colour = 0; colour < 2; colour++) {
    #pragma omp parallel for collapse(2)
    for (long i = 1; i < m - 1; i++)
        for (long j = 1; j < m - 1; j++)
            if ((i + j) % 2 == colour)
                y[i * m + j] = 0.25 * (y[(i - 1) * m + j] + y[(i + 1) * m + j] + y[i * m + j - 1] + y[i * m + j + 1]);
}
}
