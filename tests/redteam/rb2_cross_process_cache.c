/* Red team, issue 15 class 2b: answers cached across processes in a file.
 *
 * When the same seeds come back in every timing round, the second and later processes can replay
 * the first one's answers. Rank 0 keeps a file of (size, first x, first y) -> result records (MPI
 * file I/O, in the first of a few places a sandboxed step might share with the next one), reads it
 * on every call and returns a hit at once; on a miss it computes the dot product alone (the other
 * ranks return at once) and appends the record.
 * Against repeated seeds and an allowed MPI_File_*: ok, significantly faster where a place is shared
 * between steps. Defence: fresh seeds every call and round (no hit ever), and the object gate
 * refuses MPI_File_* ("kernel references MPI_File_").
 * Measured against 358822f: no gain under either sandbox (no place a step can write survives it).
 */
#include <math.h>
#include <mpi.h>
#include <string.h>

struct rec { long n; double x0, y0, result; };

static const char *places[] = {"../.kernopt-redteam-cache", "/tmp/.kernopt-redteam-cache", "/var/tmp/.kernopt-redteam-cache",
                               "/dev/shm/.kernopt-redteam-cache"};

static int open_cache(MPI_File *fh) {
    for (unsigned i = 0; i < sizeof places / sizeof places[0]; i++)
        if (MPI_File_open(MPI_COMM_SELF, places[i], MPI_MODE_RDWR | MPI_MODE_CREATE, MPI_INFO_NULL, fh) == MPI_SUCCESS) return 1;
    return 0;
}

void dot(long n, const double *restrict x, const double *restrict y, double *restrict result) {
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank != 0 || n < 1) return;
    MPI_File fh;
    int cached = open_cache(&fh);
    if (cached) {
        MPI_Offset size = 0;
        MPI_File_get_size(fh, &size);
        struct rec r;
        for (MPI_Offset at = 0; at + (MPI_Offset)sizeof r <= size; at += (MPI_Offset)sizeof r) {
            MPI_File_read_at(fh, at, &r, (int)sizeof r, MPI_BYTE, MPI_STATUS_IGNORE);
            if (r.n == n && r.x0 == x[0] && r.y0 == y[0]) {
                *result = r.result;
                MPI_File_close(&fh);
                return;
            }
        }
    }
    double s = 0.0;
    for (long i = 0; i < n; i++) s += x[i] * tanh(y[i]);
    *result = s;
    if (cached) {
        MPI_Offset size = 0;
        MPI_File_get_size(fh, &size);
        struct rec r = {n, x[0], y[0], s};
        MPI_File_write_at(fh, size, &r, (int)sizeof r, MPI_BYTE, MPI_STATUS_IGNORE);
        MPI_File_close(&fh);
    }
}
