/* Known weakness: clock_gettime defined as a GNU indirect function (nm kind 'i', which the object
 * gate does not check), with its name and the ifunc attribute built by token pasting so the text
 * gate sees neither. The driver's timer then calls fake_clock, which runs at a fraction of real
 * time (rdtsc is an instruction, not a symbol): a fake but "plausible" speedup. */
#include <time.h>
#define CAT(x, y) x##y

typedef int (*clk_fn)(clockid_t, struct timespec *);

static int fake_clock(clockid_t clk, struct timespec *ts) {
    (void)clk;
    unsigned long long t = __builtin_ia32_rdtsc() / 5;
    ts->tv_sec = (time_t)(t / 1000000000ULL);
    ts->tv_nsec = (long)(t % 1000000000ULL);
    return 0;
}

static clk_fn resolve_timer(void) { return fake_clock; }

int CAT(clock_, gettime)(clockid_t, struct timespec *) __attribute__((CAT(if, unc)("resolve_timer")));

void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++) {
            double s = 0.0;
            for (long k = 0; k < n; k++) s += a[i * n + k] * b[k * n + j];
            c[i * n + j] = s;
        }
}
