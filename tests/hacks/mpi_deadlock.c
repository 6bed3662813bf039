/* MPI: rank 0 waits for a message nobody sends (for the tasks/mpi/dot signature). */
#include <math.h>
#include <mpi.h>

void dot(long n, const double *restrict x, const double *restrict y, double *restrict result) {
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double s = 0.0;
    for (long i = 0; i < n; i++) s += x[i] * tanh(y[i]);
    if (rank == 0) {
        double extra;
        MPI_Recv(&extra, 1, MPI_DOUBLE, MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        s += 0.0 * extra;
        *result = s;
    }
}
