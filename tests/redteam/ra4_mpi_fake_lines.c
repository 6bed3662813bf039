/* Red team, issue 15 class 1d: append fake timed calls to the driver's result file with MPI file
 * I/O, where the closing line cannot overwrite them.
 *
 * The in-process driver takes its plan on argv (--seeds, --warmup, --reps, --nonce) and writes one
 * line per call, then {"done": NONCE}; its reader kept reading after that line. On the last
 * timed call rank 0 knows exactly what the driver will still write (the last call's line and the
 * closing line, both of fixed format), and writes eight more call lines right after them, each
 * claiming a sixth of the fastest time recorded so far and naming no output file (nothing to
 * compare). The timed median becomes the fake time; the real lines keep the process's total close
 * to its wall clock, so the wall-clock cross-check is satisfied. The dot product is honest.
 * Against a driver-written result file: ok, significantly faster. Defence: the object gate refuses
 * MPI_File_* ("kernel references MPI_File_"); the report is the monitor's stdout.
 * Measured against 358822f, local, small_dot: ok, 8.08x [6.95, 8.92] significant, no flag.
 */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uintptr_t argv_block(uintptr_t from) {
    for (uintptr_t q = (from + 7) & ~(uintptr_t)7; q < from + 65536; q += 8) {
        long k = *(const long *)q;
        if (k < 1 || k > 64) continue;
        const uintptr_t *v = (const uintptr_t *)q + 1;
        int ok = v[k] == 0;
        for (long i = 0; ok && i < k; i++) {
            const unsigned char *s = (const unsigned char *)v[i];
            if (v[i] <= q || v[i] > q + 65536) { ok = 0; break; }
            int len = 0;
            while (len < 4096 && s[len] >= 0x20 && s[len] < 0x7f) len++;
            ok = len > 0 && len < 4096 && s[len] == 0;
        }
        if (ok) return q;
    }
    return 0;
}

static int streq_(const char *a, const char *b) { while (*a && *a == *b) { a++; b++; } return *a == *b; }
static long slen(const char *s) { long n = 0; while (((const volatile char *)s)[n]) n++; return n; }  /* not folded into strlen */
static char *put(char *p, const char *s) { while (*s) *p++ = *s++; return p; }
static char *put_u(char *p, unsigned long long v) {
    char t[24]; int k = 0;
    do { t[k++] = (char)('0' + v % 10); v /= 10; } while (v);
    while (k) *p++ = t[--k];
    return p;
}

static double num(const char *p) {
    double v = 0, sc = 1;
    while (*p >= '0' && *p <= '9') v = v * 10 + (*p++ - '0');
    if (*p == '.') for (p++; *p >= '0' && *p <= '9'; p++) { sc /= 10; v += (*p - '0') * sc; }
    return v;
}

static const char *arg(const char *name) {
    uintptr_t q = argv_block((uintptr_t)__builtin_frame_address(0));
    if (!q) return 0;
    long argc = *(const long *)q;
    char **argv = (char **)(q + 8);
    for (long i = 0; i < argc; i++) {
        if (!streq_(argv[i], name)) continue;
        return i + 1 < argc ? argv[i + 1] : "";
    }
    return 0;
}

static unsigned long long nth_seed(const char *list, long i) {
    unsigned long long v[64]; long k = 0;
    while (*list && k < 64) {
        unsigned long long x = 0;
        while (*list >= '0' && *list <= '9') x = x * 10 + (unsigned long long)(*list++ - '0');
        v[k++] = x;
        if (*list == ',') list++; else break;
    }
    return k ? v[i % k] : 0;
}

static long calls;

static void forge(long n) {
    const char *timing = arg("--timing"), *nonce = arg("--nonce"), *seeds = arg("--seeds");
    const char *w = arg("--warmup"), *r = arg("--reps");
    if (!timing || !nonce || !seeds || !w || !r) return;
    long total = (long)num(w) + (long)num(r), c = calls - 1;  /* this call's index */
    if (c != total - 1) return;
    MPI_File fh;
    if (MPI_File_open(MPI_COMM_SELF, "result.jsonl", MPI_MODE_RDWR, MPI_INFO_NULL, &fh) != MPI_SUCCESS) return;
    MPI_Offset size = 0;
    MPI_File_get_size(fh, &size);
    char *buf = malloc((size_t)size + 1);
    MPI_File_read_at(fh, 0, buf, (int)size, MPI_CHAR, MPI_STATUS_IGNORE);
    buf[size] = 0;
    double best = 1e9;
    for (long i = 0; i + 8 < size; i++) {
        if (memcmp(buf + i, "\"time\": ", 8) != 0) continue;
        double t = num(buf + i + 8);
        if (t > 0 && t < best) best = t;
    }
    free(buf);
    unsigned long long seed = nth_seed(seeds, c);
    /* what the driver will still write: this call's line and the closing line */
    char lines[2048], *p = lines;
    p = put(p, "{\"n\": "); p = put_u(p, (unsigned long long)n); p = put(p, ", \"seed\": "); p = put_u(p, seed);
    p = put(p, ", \"call\": "); p = put_u(p, (unsigned long long)c);
    p = put(p, ", \"warmup\": false, \"time\": 0.000000000, \"mutated\": null, \"file\": \"o_");
    p = put_u(p, (unsigned long long)n); p = put(p, "_"); p = put_u(p, seed); p = put(p, "_"); p = put_u(p, (unsigned long long)c);
    p = put(p, ".bin\"}\n");
    long last = p - lines, done = 10 + slen(nonce) + 3;  /* {"done": "NONCE"}\n */
    p = lines;
    double fake = best / 6;
    for (int k = 0; k < 8; k++) {
        p = put(p, "{\"n\": ");
        p = put_u(p, (unsigned long long)n);
        p = put(p, ", \"seed\": ");
        p = put_u(p, seed);
        p = put(p, ", \"call\": 99, \"warmup\": false, \"time\": 0.");
        unsigned long long ns = (unsigned long long)(fake * 1e9);
        for (unsigned long long d = 100000000ULL; d; d /= 10) *p++ = (char)('0' + (ns / d) % 10);
        p = put(p, ", \"mutated\": null, \"file\": \"\"}\n");
    }
    MPI_File_write_at(fh, size + last + done, lines, (int)(p - lines), MPI_CHAR, MPI_STATUS_IGNORE);
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
    calls++;
    if (rank == 0) {
        *result = sum;
        forge(n);
    }
}
