/* Serial baseline: polar histogram of n points (x[i], y[i]) in [-1,1)^2.
 * ring = floor(hypot(x, y) * NRING / sqrt(2)), sector = floor((atan2(y, x) + pi) * NSECT / (2 pi)),
 * both clamped to their last bin; hist[ring * NSECT + sector] counts the points. */
#include <math.h>
#include <stdint.h>

#define NRING 16
#define NSECT 32
#define PI 3.14159265358979323846
#define SQRT2 1.41421356237309504880

void histogram(long n, const double *restrict x, const double *restrict y, int64_t *restrict hist) {
    for (long b = 0; b < NRING * NSECT; b++) {
        hist[b] = 0;
    }
    for (long i = 0; i < n; i++) {
        long ring = (long)(hypot(x[i], y[i]) * (NRING / SQRT2));
        long sect = (long)((atan2(y[i], x[i]) + PI) * (NSECT / (2.0 * PI)));
        if (ring > NRING - 1) ring = NRING - 1;
        if (sect > NSECT - 1) sect = NSECT - 1;
        hist[ring * NSECT + sect]++;
    }
}
