/* Serial baseline: all-pairs softened gravity (G = 1). For every body i, over all j (j = i too):
 *   r2 = |p_j - p_i|^2 + EPS2,  pot_i -= m_j / sqrt(r2),  acc_i += m_j (p_j - p_i) / r2^(3/2). */
#include <math.h>

#define EPS2 1e-4

void nbody(long n, const double *restrict pos, const double *restrict mass, double *restrict acc,
           double *restrict pot) {
    for (long i = 0; i < n; i++) {
        double ax = 0.0, ay = 0.0, az = 0.0, phi = 0.0;
        for (long j = 0; j < n; j++) {
            double dx = pos[3 * j] - pos[3 * i];
            double dy = pos[3 * j + 1] - pos[3 * i + 1];
            double dz = pos[3 * j + 2] - pos[3 * i + 2];
            double r2 = dx * dx + dy * dy + dz * dz + EPS2;
            double rinv = 1.0 / sqrt(r2);
            double mr = mass[j] * rinv;
            double mr3 = mr * rinv * rinv;
            phi -= mr;
            ax += dx * mr3;
            ay += dy * mr3;
            az += dz * mr3;
        }
        acc[3 * i] = ax;
        acc[3 * i + 1] = ay;
        acc[3 * i + 2] = az;
        pot[i] = phi;
    }
}
