/* Naive MPI baseline: `steps` Jacobi sweeps of the 5-point stencil on an n x n grid.
 *
 * Rows are split into contiguous blocks, one per rank. Rank 0 mails every rank its rows one
 * message per row (although every rank already holds the grid), halos are exchanged with blocking
 * MPI_Send/MPI_Recv in a serialized chain (rank r waits for rank r-1 before it can pass its own row
 * on), the new grid is copied back into the old one after every sweep, and rank 0 collects the
 * final grid one row per message. */
#include <stdlib.h>
#include <string.h>
#include <mpi.h>

static void block(long n, int size, int r, long *lo, long *cnt) {
    long chunk = (n + size - 1) / size;
    long a = (long)r * chunk, b = a + chunk;
    if (a > n) a = n;
    if (b > n) b = n;
    *lo = a;
    *cnt = b - a;
}

void stencil2d(long n, int steps, const double *restrict in, double *restrict out) {
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    long lo, cnt;
    block(n, size, rank, &lo, &cnt);
    long chunk = (n + size - 1) / size;
    int active = (int)((n + chunk - 1) / chunk); /* ranks 0..active-1 own at least one row */

    /* Local rows with one halo row above and below: local row k+1 is global row lo+k. */
    double *cur = calloc((size_t)(cnt + 2) * (size_t)n, sizeof *cur);
    double *nxt = calloc((size_t)(cnt + 2) * (size_t)n, sizeof *nxt);

    /* Distribute the initial grid from rank 0, one row per message. */
    if (rank == 0) {
        memcpy(cur + n, in, (size_t)cnt * (size_t)n * sizeof *cur);
        for (int r = 1; r < active; r++) {
            long rlo, rcnt;
            block(n, size, r, &rlo, &rcnt);
            for (long k = 0; k < rcnt; k++)
                MPI_Send(in + (rlo + k) * n, (int)n, MPI_DOUBLE, r, 0, MPI_COMM_WORLD);
        }
    } else {
        for (long k = 0; k < cnt; k++)
            MPI_Recv(cur + (k + 1) * n, (int)n, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }

    for (int t = 0; t < steps && rank < active; t++) {
        /* Downward pass: receive the row above from rank-1, then hand our last row to rank+1. */
        if (rank > 0)
            MPI_Recv(cur, (int)n, MPI_DOUBLE, rank - 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (rank < active - 1)
            MPI_Send(cur + cnt * n, (int)n, MPI_DOUBLE, rank + 1, 1, MPI_COMM_WORLD);
        /* Upward pass: receive the row below from rank+1, then hand our first row to rank-1. */
        if (rank < active - 1)
            MPI_Recv(cur + (cnt + 1) * n, (int)n, MPI_DOUBLE, rank + 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (rank > 0)
            MPI_Send(cur + n, (int)n, MPI_DOUBLE, rank - 1, 2, MPI_COMM_WORLD);

        for (long k = 1; k <= cnt; k++) {
            long g = lo + k - 1;
            double *o = nxt + k * n;
            const double *c = cur + k * n;
            if (g == 0 || g == n - 1) { /* fixed boundary rows */
                for (long j = 0; j < n; j++) o[j] = c[j];
                continue;
            }
            o[0] = c[0];
            for (long j = 1; j < n - 1; j++)
                o[j] = 0.25 * (c[j - n] + c[j + n] + c[j - 1] + c[j + 1]);
            o[n - 1] = c[n - 1];
        }
        memcpy(cur + n, nxt + n, (size_t)cnt * (size_t)n * sizeof *cur);
    }

    /* Collect the final grid on rank 0, one row per message. */
    if (rank == 0) {
        memcpy(out, cur + n, (size_t)cnt * (size_t)n * sizeof *out);
        for (int r = 1; r < active; r++) {
            long rlo, rcnt;
            block(n, size, r, &rlo, &rcnt);
            for (long k = 0; k < rcnt; k++)
                MPI_Recv(out + (rlo + k) * n, (int)n, MPI_DOUBLE, r, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
    } else {
        for (long k = 0; k < cnt; k++)
            MPI_Send(cur + (k + 1) * n, (int)n, MPI_DOUBLE, 0, 3, MPI_COMM_WORLD);
    }
    free(cur);
    free(nxt);
}
