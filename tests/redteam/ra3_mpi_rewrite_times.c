/* Red team, issue 15 class 1c: rewrite the measured times in the driver's result file with MPI
 * file I/O (MPI_File_* was on the object gate's allow-list).
 *
 * An in-process driver writes one line per call to ./result.jsonl and flushes it. On every call
 * rank 0 opens that file with MPI_File_open, turns the warm-up line into a timed one and divides
 * the time of every earlier line by 5, keeping every line's length ("warmup": true, ->
 * "warmup":false,). Only the last call's line is out of reach, so the timed median is 1/5 of the
 * real one. The dot product itself is computed honestly.
 * Against a driver-written result file: ok, significantly faster. Defence: the object gate
 * refuses MPI_File_* (rejected, "kernel references MPI_File_open"); the report is the monitor's stdout.
 * Measured against 358822f, local, small_dot: ok, 6.15x [3.71, 7.03] significant, no flag.
 */
#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

static long find(const char *h, long hn, long from, const char *pat) {
    long pn = 0;
    while (pat[pn]) pn++;
    for (long i = from; i + pn <= hn; i++)
        if (memcmp(h + i, pat, (size_t)pn) == 0) return i;
    return -1;
}

/* divide the fixed-point number at p (digits '.' digits) by 5 in place, keeping its width */
static void shrink(char *p, long end) {
    long i = 0, frac = -1;
    double v = 0, scale = 1;
    while (p + i < p + end && ((p[i] >= '0' && p[i] <= '9') || p[i] == '.')) {
        if (p[i] == '.') frac = 0;
        else if (frac < 0) v = v * 10 + (p[i] - '0');
        else { scale /= 10; v += (p[i] - '0') * scale; frac++; }
        i++;
    }
    if (frac <= 0) return;
    long ip = i - frac - 1;  /* integer digits */
    double units = floor(v / 5 * pow(10, (double)frac) + 0.5);
    for (long k = i - 1; k >= 0; k--) {
        if (p[k] == '.') continue;
        p[k] = (char)('0' + (int)fmod(units, 10));
        units = floor(units / 10);
    }
    (void)ip;
}

static void tamper(void) {
    MPI_File fh;
    if (MPI_File_open(MPI_COMM_SELF, "result.jsonl", MPI_MODE_RDWR, MPI_INFO_NULL, &fh) != MPI_SUCCESS) return;
    MPI_Offset size = 0;
    MPI_File_get_size(fh, &size);
    if (size > 0 && size < (1 << 20)) {
        char *buf = malloc((size_t)size);
        MPI_File_read_at(fh, 0, buf, (int)size, MPI_CHAR, MPI_STATUS_IGNORE);
        const char *pats[2] = {"\"warmup\": true, \"time\": ", "\"warmup\": false, \"time\": "};
        const char *news[2] = {"\"warmup\":false, \"time\": ", "\"warmup\":false , \"time\": "};
        for (int t = 0; t < 2; t++) {
            long at = 0;
            while ((at = find(buf, (long)size, at, pats[t])) >= 0) {
                long len = 0;
                while (pats[t][len]) len++;
                memcpy(buf + at, news[t], (size_t)len);
                shrink(buf + at + len, (long)size - at - len);
                at += len;
            }
        }
        MPI_File_write_at(fh, 0, buf, (int)size, MPI_CHAR, MPI_STATUS_IGNORE);
        free(buf);
    }
    MPI_File_close(&fh);
}

void dot(long n, const double *restrict x, const double *restrict y, double *restrict result) {
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long chunk = (n + size - 1) / size, lo = rank * chunk, hi = lo + chunk < n ? lo + chunk : n;
    double part = 0.0, sum = 0.0;
    for (long i = lo; i < hi; i++) part += x[i] * tanh(y[i]);
    MPI_Reduce(&part, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        *result = sum;
        tamper();
    }
}
