/* Naive MPI baseline: histogram of n doubles into nbins bins with sorted, non-uniform edges.
 * Bin b counts the x with edges[b] <= x < edges[b+1]; values outside [edges[0], edges[nbins]) are
 * not counted.
 *
 * Each rank takes every size-th element (a cyclic split, so every rank streams the whole array),
 * finds its bin with a branchy binary search, and then rank 0 collects the local histograms one
 * bin per message: nbins * (size - 1) MPI_Send/MPI_Recv pairs instead of one reduction. */
#include <stdlib.h>
#include <mpi.h>

static long find_bin(double v, long nbins, const double *edges) {
    if (v < edges[0] || v >= edges[nbins]) return -1;
    long lo = 0, hi = nbins; /* edges[lo] <= v < edges[hi] */
    while (hi - lo > 1) {
        long mid = (lo + hi) / 2;
        if (v < edges[mid]) hi = mid;
        else lo = mid;
    }
    return lo;
}

void histogram(long n, const double *restrict x, long nbins, const double *restrict edges, long *restrict counts) {
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    long *local = calloc((size_t)nbins, sizeof *local);
    for (long i = rank; i < n; i += size) {
        long b = find_bin(x[i], nbins, edges);
        if (b >= 0) local[b]++;
    }

    if (rank == 0) {
        for (long b = 0; b < nbins; b++) {
            counts[b] = local[b];
            for (int r = 1; r < size; r++) {
                long c;
                MPI_Recv(&c, 1, MPI_LONG, r, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                counts[b] += c;
            }
        }
    } else {
        for (long b = 0; b < nbins; b++) MPI_Send(&local[b], 1, MPI_LONG, 0, 0, MPI_COMM_WORLD);
    }
    free(local);
}
