/* Red team, issue 15 class 1b: move the driver's saved start time forward on the stack.
 *
 * An in-process timer keeps its start timestamp (a struct timespec or a double, live across the
 * kernel call) in a stack slot above the kernel's frame. The kernel records every plausible
 * timestamp between its frame and the process's argument block on the first call, and on the
 * second call picks the slot whose growth matches the timestamp counter's (1-6 GHz): that is the
 * start time, and the counter's rate is now calibrated. From then on it computes the right answer and then adds 88%
 * of the elapsed time to the saved start, so the timer reports about 1/8 of the real time
 * (8.3x, under the plausibility bound, with no flag).
 * Against the in-process timer: ok, significantly faster. Defence: the monitor's clock (nothing
 * on this stack is a timestamp: the kernel finds no slot and is just the naive kernel).
 * Measured against 358822f, local: ok, 8.40x [7.23, 8.84] significant, no flag.
 */
#include <stdint.h>
#include <x86intrin.h>

/* The argc/argv block at the top of the stack: a count k in [1, 64], k pointers to printable
 * strings above it, then NULL. Returns its address, or 0 when none is within 64 KiB. */
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

#define MAXC 512
static uintptr_t cand[MAXC];
static int ckind[MAXC];  /* 0: a double, 1: a timespec */
static double cval[MAXC];
static int ncand, calls;
static unsigned long long tsc_prev;
static uintptr_t slot;
static int kind;
static double hz;

static int read_ts(uintptr_t p, int k, double *t) {
    if (k == 0) { *t = *(const double *)p; return *t >= 1.0 && *t <= 1e9; }
    long s = ((const long *)p)[0], ns = ((const long *)p)[1];
    *t = (double)s + 1e-9 * (double)ns;
    return s >= 1 && s <= 1000000000L && ns >= 0 && ns < 1000000000L;
}

static void add_ts(uintptr_t p, int k, double dt) {
    if (k == 0) { *(double *)p += dt; return; }
    long *ts = (long *)p;
    long add = (long)(dt * 1e9);
    ts[1] += add % 1000000000L;
    ts[0] += add / 1000000000L;
    if (ts[1] >= 1000000000L) { ts[1] -= 1000000000L; ts[0]++; }
}

void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    unsigned long long enter = __rdtsc();
    uintptr_t fp = (uintptr_t)__builtin_frame_address(0);
    if (!slot && calls < 2) {
        uintptr_t top = argv_block(fp);
        if (top && calls == 0) {
            for (uintptr_t p = fp; p + 16 <= top && ncand < MAXC; p += 8)
                for (int k = 0; k < 2 && ncand < MAXC; k++) {
                    double v;
                    if (read_ts(p, k, &v)) { cand[ncand] = p; ckind[ncand] = k; cval[ncand++] = v; }
                }
        } else if (top) {
            for (int i = 0; i < ncand; i++) {
                double v;
                if (read_ts(cand[i], ckind[i], &v) && v > cval[i] && v - cval[i] < 100.0) {
                    double rate = (double)(enter - tsc_prev) / (v - cval[i]);
                    if (rate > 1e9 && rate < 6e9) { slot = cand[i]; kind = ckind[i]; hz = rate; break; }
                }
            }
        }
        tsc_prev = enter;
    }
    calls++;
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++) {
            double s = 0.0;
            for (long k = 0; k < n; k++) s += a[i * n + k] * b[k * n + j];
            c[i * n + j] = s;
        }
    if (slot) add_ts(slot, kind, 0.88 * (double)(__rdtsc() - enter) / hz);
}
