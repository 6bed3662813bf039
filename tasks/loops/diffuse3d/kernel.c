/* Explicit diffusion with a spatially varying coefficient on an n^3 grid:
 * STEPS time steps of u' = u + DT*kappa*(sum of the 6 neighbours - 6u), out of place,
 * ping-ponging between u and tmp. The boundary faces keep their initial values. */
#define STEPS 16
#define DT 0.1
#define I3(i, j, k) (((i) * n + (j)) * n + (k))

void diffuse3d(long n, const double *restrict kappa, const double *restrict u0,
               double *restrict u, double *restrict tmp)
{
    for (long p = 0; p < n * n * n; p++) {
        u[p] = u0[p];
        tmp[p] = u0[p];
    }
    double *src = u, *dst = tmp;
    for (int t = 0; t < STEPS; t++) {
        for (long i = 1; i < n - 1; i++)
            for (long j = 1; j < n - 1; j++)
                for (long k = 1; k < n - 1; k++) {
                    double c = src[I3(i, j, k)];
                    double nb = src[I3(i - 1, j, k)] + src[I3(i + 1, j, k)]
                              + src[I3(i, j - 1, k)] + src[I3(i, j + 1, k)]
                              + src[I3(i, j, k - 1)] + src[I3(i, j, k + 1)];
                    dst[I3(i, j, k)] = c + DT * kappa[I3(i, j, k)] * (nb - 6.0 * c);
                }
        double *sw = src; src = dst; dst = sw;
    }
    /* STEPS is even: the last sweep wrote u */
}
