/* Naive MPI baseline: `iters` steps of normalized power iteration with a dense n x n matrix,
 * v <- A v / ||A v||_2, starting from v = x.
 *
 * Textbook master/worker: every step, rank 0 mails the current vector to each worker, then hands
 * out the matrix one row per message (although every rank already holds A); a worker returns the
 * dot product of its row with the vector and is given the next row. Rank 0 only coordinates (it
 * computes rows itself only when it runs alone) and normalizes the vector. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>

#define TAG_DONE 0 /* row tags are row + 1 */

static double row_dot(long n, const double *row, const double *v) {
    double s = 0.0;
    for (long j = 0; j < n; j++) s += row[j] * v[j];
    return s;
}

void matvec(long n, int iters, const double *restrict a, const double *restrict x, double *restrict y) {
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    double *v = malloc((size_t)n * sizeof *v);
    double *w = malloc((size_t)n * sizeof *w);
    double *row = malloc((size_t)n * sizeof *row);
    if (rank == 0) memcpy(v, x, (size_t)n * sizeof *v);

    for (int it = 0; it < iters; it++) {
        if (rank == 0) {
            if (size == 1) {
                for (long i = 0; i < n; i++) w[i] = row_dot(n, a + i * n, v);
            } else {
                for (int r = 1; r < size; r++) MPI_Send(v, (int)n, MPI_DOUBLE, r, 0, MPI_COMM_WORLD);
                long next = 0;
                int busy = 0;
                for (int r = 1; r < size; r++) { /* prime every worker with one row, or stop it */
                    if (next < n) {
                        MPI_Send(a + next * n, (int)n, MPI_DOUBLE, r, (int)(next + 1), MPI_COMM_WORLD);
                        next++;
                        busy++;
                    } else {
                        MPI_Send(NULL, 0, MPI_DOUBLE, r, TAG_DONE, MPI_COMM_WORLD);
                    }
                }
                while (busy > 0) {
                    double d;
                    MPI_Status st;
                    MPI_Recv(&d, 1, MPI_DOUBLE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
                    w[st.MPI_TAG - 1] = d;
                    if (next < n) {
                        MPI_Send(a + next * n, (int)n, MPI_DOUBLE, st.MPI_SOURCE, (int)(next + 1), MPI_COMM_WORLD);
                        next++;
                    } else {
                        MPI_Send(NULL, 0, MPI_DOUBLE, st.MPI_SOURCE, TAG_DONE, MPI_COMM_WORLD);
                        busy--;
                    }
                }
            }
            double nrm = 0.0;
            for (long i = 0; i < n; i++) nrm += w[i] * w[i];
            nrm = sqrt(nrm);
            for (long i = 0; i < n; i++) v[i] = nrm > 0.0 ? w[i] / nrm : w[i];
        } else {
            MPI_Recv(v, (int)n, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            for (;;) {
                MPI_Status st;
                MPI_Recv(row, (int)n, MPI_DOUBLE, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
                if (st.MPI_TAG == TAG_DONE) break;
                double d = row_dot(n, row, v);
                MPI_Send(&d, 1, MPI_DOUBLE, 0, st.MPI_TAG, MPI_COMM_WORLD);
            }
        }
    }
    if (rank == 0) memcpy(y, v, (size_t)n * sizeof *y);
    free(v);
    free(w);
    free(row);
}
