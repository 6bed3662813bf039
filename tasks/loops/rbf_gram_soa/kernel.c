#include <math.h>
/* Gaussian (RBF) kernel matrix of n 3-D points stored as a structure of arrays; only the strict
 * lower triangle is computed, packed row by row: g[i*(i-1)/2 + j] = exp(-|p_i - p_j|^2 / (2 s^2))
 * for j < i. */
struct cloud {
    const double *x;
    const double *y;
    const double *z;
};

void rbf_gram_soa(long n, double sigma, const struct cloud *pts, double *restrict g)
{
    const double scale = -0.5 / (sigma * sigma);
    for (long i = 1; i < n; i++) {
        double *row = g + i * (i - 1) / 2;
        for (long j = 0; j < i; j++) {
            double dx = pts->x[i] - pts->x[j];
            double dy = pts->y[i] - pts->y[j];
            double dz = pts->z[i] - pts->z[j];
            row[j] = exp(scale * (dx * dx + dy * dy + dz * dz));
        }
    }
}
