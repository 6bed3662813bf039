/* Gauss-Seidel sweeps for -lap(u) = f on an nr x nc grid (nc = (5n)/4 + 2), in place, the time
 * (sweep) loop inside the kernel: nsweeps = 10 lexicographic sweeps over the interior, each
 * point from its four neighbours (the new values of the north and west ones) and f; the
 * boundary stays fixed. Flat row-major arrays.
 * Not parallelizable as written: the sweep loop carries a dependence, and within a sweep each
 * point depends on its new north and west neighbours (both i and j). Only a wavefront (i + j, or
 * skewed with the sweeps) runs points in parallel. */
void seidel2d_sweeps(long n, double *restrict u, const double *restrict f)
{
    long nr = n, nc = (5 * n) / 4 + 2;
    const long nsweeps = 10;
    const double h2 = 1.0 / ((double)(nc - 1) * (double)(nc - 1));

    for (long t = 0; t < nsweeps; t++)
        for (long i = 1; i < nr - 1; i++)
            for (long j = 1; j < nc - 1; j++)
                u[i * nc + j] = 0.25 * (u[(i - 1) * nc + j] + u[(i + 1) * nc + j]
                                        + u[i * nc + j - 1] + u[i * nc + j + 1] + h2 * f[i * nc + j]);
}
