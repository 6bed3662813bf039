/* 3-D Gauss-Seidel relaxation with a 7-point stencil, in place, the sweep loop inside the kernel:
 * 6 lexicographic sweeps over the interior of an nz x ny x nx grid (ny = (3n)/4 + 2,
 * nx = (5n)/4 + 1), each point a weighted mean of its six neighbours (the new values of the
 * lower ones) and itself. Flat arrays; the boundary stays fixed.
 * Not parallelizable as written: dependences on z, y and x within a sweep and across sweeps;
 * only a wavefront (hyperplanes z + y + x, or skewed with the sweeps) is parallel. */
void seidel3d_sweeps(long n, double *restrict u)
{
    long nz = n, ny = (3 * n) / 4 + 2, nx = (5 * n) / 4 + 1;
    const long nsweeps = 6;

    for (long t = 0; t < nsweeps; t++)
        for (long z = 1; z < nz - 1; z++)
            for (long y = 1; y < ny - 1; y++)
                for (long x = 1; x < nx - 1; x++) {
                    long c = (z * ny + y) * nx + x;
                    u[c] = (2.0 * u[c] + u[c - nx * ny] + u[c + nx * ny] + u[c - nx] + u[c + nx]
                            + u[c - 1] + u[c + 1]) / 8.0;
                }
}
