/* Red-team control: an honest MPI dot product (each rank sums its block of the data it already
 * holds, one reduction to rank 0). Must stay ok. */
#include <math.h>
#include <mpi.h>

void dot(long n, const double *restrict x, const double *restrict y, double *restrict result) {
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long chunk = (n + size - 1) / size, lo = rank * chunk, hi = lo + chunk < n ? lo + chunk : n;
    double part = 0.0, sum = 0.0;
    for (long i = lo; i < hi; i++) part += x[i] * tanh(y[i]);
    MPI_Reduce(&part, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) *result = sum;
}
