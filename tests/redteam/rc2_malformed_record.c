/* Red team, issue 15 class 3b: a malformed record in the result file.
 *
 * Like rc1_host_file_name.c, but the appended call has "n": "crash": the old reader called
 * int() on it and the evaluation ended in a traceback instead of a verdict.
 * Against a driver-written result file: an exception out of evaluate(). Defence: the object gate
 * refuses MPI_File_*; the monitor's report is parsed strictly (malformed -> runtime_error).
 * Measured against 358822f, local: ValueError traceback out of evaluate().
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

/* After the last call of a correctness run, append a call whose size is not a number. */
static void forge(long n) {
    const char *nonce = arg("--nonce"), *seeds = arg("--seeds"), *sizes = arg("--sizes");
    if (arg("--timing") || !nonce || !seeds || !sizes) return;
    long nseed = 1, nsize = 1;
    for (const char *p = seeds; *p; p++) nseed += *p == ',';
    for (const char *p = sizes; *p; p++) nsize += *p == ',';
    if (calls != nseed * nsize) return;  /* not the last call yet */
    long c = nseed - 1;
    unsigned long long seed = nth_seed(seeds, c);
    MPI_File fh;
    if (MPI_File_open(MPI_COMM_SELF, "result.jsonl", MPI_MODE_RDWR, MPI_INFO_NULL, &fh) != MPI_SUCCESS) return;
    MPI_Offset size = 0;
    MPI_File_get_size(fh, &size);
    char lines[2048], *p = lines;
    p = put(p, "{\"n\": "); p = put_u(p, (unsigned long long)n); p = put(p, ", \"seed\": "); p = put_u(p, seed);
    p = put(p, ", \"call\": "); p = put_u(p, (unsigned long long)c);
    p = put(p, ", \"warmup\": false, \"time\": 0.000000000, \"mutated\": null, \"file\": \"o_");
    p = put_u(p, (unsigned long long)n); p = put(p, "_"); p = put_u(p, seed); p = put(p, "_"); p = put_u(p, (unsigned long long)c);
    p = put(p, ".bin\"}\n");
    long last = p - lines, done = 10 + slen(nonce) + 3;  /* {"done": "NONCE"}\n */
    p = lines;
    p = put(p, "{\"n\": ");
    p = put(p, "\"crash\"");
    p = put(p, ", \"seed\": "); p = put_u(p, seed);
    p = put(p, ", \"call\": 0, \"warmup\": false, \"time\": 0.0, \"mutated\": null, \"file\": \"o_1_1_0.bin\"}\n");
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
