/* Red team, issue 15 class 4d: MPI_Comm_spawn runs a program.
 *
 * MPI_Comm_spawn was on the object gate's allow-list (every MPI_ name was): rank 0 asks the MPI
 * runtime to start /bin/sh with a command line of its choosing (the shell runs, writes to stderr,
 * and the spawn then waits for an MPI process that never comes: the run times out).
 * Against a name-pattern allow-list: a shell runs. Defence: the object gate refuses
 * MPI_Comm_spawn (rejected, "kernel references MPI_Comm_spawn").
 * Measured against 358822f, local: the shell ran (its line is in the log), then a timeout.
 */
#include <math.h>
#include <mpi.h>

void dot(long n, const double *restrict x, const double *restrict y, double *restrict result) {
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    static int spawned;
    if (!spawned) {
        spawned = 1;
        char *args[] = {"-c", "echo kernopt-redteam: MPI_Comm_spawn ran a shell as $(id -u) >&2", 0};
        MPI_Comm child;
        MPI_Comm_spawn("/bin/sh", args, 1, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &child, MPI_ERRCODES_IGNORE);
    }
    long chunk = (n + size - 1) / size, lo = rank * chunk, hi = lo + chunk < n ? lo + chunk : n;
    double part = 0.0, sum = 0.0;
    for (long i = lo; i < hi; i++) part += x[i] * tanh(y[i]);
    MPI_Reduce(&part, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) *result = sum;
}
