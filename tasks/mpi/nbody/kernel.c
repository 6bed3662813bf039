/* Naive MPI baseline: softened gravitational accelerations of n bodies (all pairs),
 *   acc_i = sum_{j != i} m_j (r_j - r_i) / (|r_j - r_i|^2 + EPS2)^(3/2).
 *
 * The pair loop uses Newton's third law (each pair i < j once, added to both bodies) and hands
 * each rank a contiguous block of i. The triangle makes that split badly unbalanced: the first
 * rank gets far more pairs than the last. Every rank accumulates into a full-length private array,
 * and rank 0 collects those arrays one rank at a time with MPI_Recv and adds them up. */
#include <math.h>
#include <stdlib.h>
#include <mpi.h>

#define EPS2 0.01

void nbody(long n, const double *restrict pos, const double *restrict mass, double *restrict acc) {
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    long chunk = (n + size - 1) / size;
    long lo = (long)rank * chunk, hi = lo + chunk;
    if (lo > n) lo = n;
    if (hi > n) hi = n;

    double *local = calloc((size_t)(3 * n), sizeof *local);
    for (long i = lo; i < hi; i++) {
        double xi = pos[3 * i], yi = pos[3 * i + 1], zi = pos[3 * i + 2];
        for (long j = i + 1; j < n; j++) {
            double dx = pos[3 * j] - xi, dy = pos[3 * j + 1] - yi, dz = pos[3 * j + 2] - zi;
            double r2 = dx * dx + dy * dy + dz * dz + EPS2;
            double inv = 1.0 / (r2 * sqrt(r2));
            local[3 * i] += mass[j] * dx * inv;
            local[3 * i + 1] += mass[j] * dy * inv;
            local[3 * i + 2] += mass[j] * dz * inv;
            local[3 * j] -= mass[i] * dx * inv;
            local[3 * j + 1] -= mass[i] * dy * inv;
            local[3 * j + 2] -= mass[i] * dz * inv;
        }
    }

    if (rank == 0) {
        double *tmp = malloc((size_t)(3 * n) * sizeof *tmp);
        for (long k = 0; k < 3 * n; k++) acc[k] = local[k];
        for (int r = 1; r < size; r++) {
            MPI_Recv(tmp, (int)(3 * n), MPI_DOUBLE, r, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            for (long k = 0; k < 3 * n; k++) acc[k] += tmp[k];
        }
        free(tmp);
    } else {
        MPI_Send(local, (int)(3 * n), MPI_DOUBLE, 0, 0, MPI_COMM_WORLD);
    }
    free(local);
}
