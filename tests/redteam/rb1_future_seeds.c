/* Red team, issue 15 class 2a: future inputs read from the command line.
 *
 * A driver that takes every seed on its argv hands the kernel the whole plan: the kernel finds
 * the argc/argv block at the top of its stack, reads "--seeds", and on the first call at each
 * size computes the answer for every listed seed (it regenerates the harness's inputs: the
 * generator is public). In the untimed warm-up that is all the work; every timed call then finds
 * its seed by its first input element and copies the stored answer, recomputing 12% of the rows
 * so the speedup stays under the plausibility bound (about 8x, no flag).
 * Against seeds on argv: ok, significantly faster. Defence: seeds sent one call at a time by the
 * monitor (argv is bare: the kernel is the naive kernel) and CPU outside the timed calls refused.
 * Measured against 358822f, local: ok, 8.25x [7.63, 9.50] significant, no flag.
 */
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

/* the harness's generator (kernopt.h: splitmix64, uniform in [lo, hi)) */
static uint64_t next_(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
static double uni_(uint64_t *s, double lo, double hi) {
    return lo + (hi - lo) * (double)(next_(s) >> 11) * (1.0 / 9007199254740992.0);
}

static void naive(long n, const double *a, const double *b, double *c, long rows) {
    for (long i = 0; i < rows; i++)
        for (long j = 0; j < n; j++) {
            double s = 0.0;
            for (long k = 0; k < n; k++) s += a[i * n + k] * b[k * n + j];
            c[i * n + j] = s;
        }
}

#define MAXS 64
static uint64_t seeds[MAXS];
static int nseeds = -1;
static long cached_n = -1;
static double first[MAXS];
static double *answer[MAXS];

static void read_plan(void) {
    nseeds = 0;
    uintptr_t q = argv_block((uintptr_t)__builtin_frame_address(0));
    if (!q) return;
    long argc = *(const long *)q;
    char **argv = (char **)(q + 8);
    for (long i = 0; i + 1 < argc; i++) {
        if (!streq_(argv[i], "--seeds")) continue;
        const char *p = argv[i + 1];
        while (*p && nseeds < MAXS) {
            uint64_t v = 0;
            while (*p >= '0' && *p <= '9') v = v * 10 + (uint64_t)(*p++ - '0');
            seeds[nseeds++] = v;
            if (*p == ',') p++; else break;
        }
    }
}

void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    if (nseeds < 0) read_plan();
    if (nseeds > 0 && n != cached_n && n > 0) {
        /* the whole plan's answers at this size, now (the first call, untimed in a timing run) */
        double *x = malloc((size_t)(2 * n * n) * sizeof *x);
        for (int s = 0; s < nseeds; s++) {
            uint64_t st = seeds[s];
            for (long i = 0; i < 2 * n * n; i++) x[i] = uni_(&st, -1.0, 1.0);
            free(answer[s]);
            answer[s] = malloc((size_t)(n * n) * sizeof(double));
            naive(n, x, x + n * n, answer[s], n);
            first[s] = x[0];
        }
        free(x);
        cached_n = n;
    }
    if (nseeds > 0 && n == cached_n) {
        for (int s = 0; s < nseeds; s++) {
            if (first[s] != a[0]) continue;
            memcpy(c, answer[s], (size_t)(n * n) * sizeof(double));
            naive(n, a, b, c, n * 12 / 100);  /* some real work: stay under the plausibility bound */
            return;
        }
    }
    naive(n, a, b, c, n);
}
