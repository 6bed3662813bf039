/* Successive over-relaxation for -lap(g) = f on an n x n float grid, in place, rows top to
 * bottom and columns left to right, SWEEPS sweeps; the boundary stays fixed.
 * Not parallelizable as written: each point uses the already-updated left and upper
 * neighbours of the same sweep (a true dependence on both loops); only order-preserving
 * schemes (a wavefront over i+j) give the same answer. */
#define SWEEPS 12

void sor_f32(long n, float omega, const float *restrict f, float *restrict g)
{
    const float h2 = 1.0f / (float)((n + 1) * (n + 1));
    for (int it = 0; it < SWEEPS; it++)
        for (int i = 1; i < n - 1; i++)
            for (int j = 1; j < n - 1; j++) {
                float gs = 0.25f * (g[(i - 1) * n + j] + g[(i + 1) * n + j]
                                  + g[i * n + j - 1] + g[i * n + j + 1] + h2 * f[i * n + j]);
                g[i * n + j] += omega * (gs - g[i * n + j]);
            }
}
