/* Naive MPI baseline: s = sum_i x[i] * tanh(y[i]).
 *
 * Rank 0 "owns" the data: it mails every other rank its block of x and y with MPI_Send (although
 * every rank already holds both vectors), each rank sums its block, and rank 0 collects the partial
 * sums one MPI_Recv at a time. */
#include <math.h>
#include <stdlib.h>
#include <mpi.h>

static void block(long n, int size, int r, long *lo, long *cnt) {
    long chunk = (n + size - 1) / size;
    long a = (long)r * chunk, b = a + chunk;
    if (a > n) a = n;
    if (b > n) b = n;
    *lo = a;
    *cnt = b - a;
}

void dot(long n, const double *restrict x, const double *restrict y, double *restrict result) {
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    long lo, cnt;
    block(n, size, rank, &lo, &cnt);
    const double *xl, *yl;
    double *buf = NULL;
    if (rank == 0) {
        for (int r = 1; r < size; r++) {
            long rlo, rcnt;
            block(n, size, r, &rlo, &rcnt);
            MPI_Send(x + rlo, (int)rcnt, MPI_DOUBLE, r, 0, MPI_COMM_WORLD);
            MPI_Send(y + rlo, (int)rcnt, MPI_DOUBLE, r, 1, MPI_COMM_WORLD);
        }
        xl = x + lo;
        yl = y + lo;
    } else {
        buf = malloc((size_t)(2 * cnt + 1) * sizeof *buf);
        MPI_Recv(buf, (int)cnt, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Recv(buf + cnt, (int)cnt, MPI_DOUBLE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        xl = buf;
        yl = buf + cnt;
    }

    double partial = 0.0;
    for (long i = 0; i < cnt; i++) partial += xl[i] * tanh(yl[i]);

    if (rank == 0) {
        double sum = partial;
        for (int r = 1; r < size; r++) {
            double p;
            MPI_Recv(&p, 1, MPI_DOUBLE, r, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            sum += p;
        }
        *result = sum;
    } else {
        MPI_Send(&partial, 1, MPI_DOUBLE, 0, 2, MPI_COMM_WORLD);
    }
    free(buf);
}
