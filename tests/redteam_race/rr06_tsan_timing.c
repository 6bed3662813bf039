/* Red team, issue 26 attack 1f: detect ThreadSanitizer by timing (instrumented code is slower).
 *
 * No timer function is referenced (the gate refuses them): the kernel reads the time-stamp counter
 * with a compiler builtin and compares a loop of memory accesses to a global array (each one a call
 * into the sanitizer when instrumented) with a loop of register arithmetic of the same length. A
 * ratio, not an absolute time, so the machine's speed does not matter.
 * Against main (e2530a1): race check "clean", verdict ok.
 * Expected defence: a static race check rejects the unsynchronized `total += s`.
 */
#include <stdint.h>

static volatile double probe_mem[512];

static int slow_memory(void) {
    int votes = 0;
    for (int round = 0; round < 5; round++) {
        uint64_t t0 = __builtin_ia32_rdtsc();
        for (int r = 0; r < 8; r++)
            for (int i = 0; i < 512; i++) probe_mem[i] = probe_mem[i] + 1.0;
        uint64_t t1 = __builtin_ia32_rdtsc();
        volatile double acc = 1.0;
        double a = acc;
        for (int i = 0; i < 4096; i++) a = a * 1.0000001 + 0.5;
        acc = a;
        uint64_t t2 = __builtin_ia32_rdtsc();
        if ((t1 - t0) > (t2 - t1)) votes++;  /* measured: 0.34 plain, 1.8-3.0 instrumented */
    }
    return votes >= 3;
}

/* The racy reduction: every thread adds its partial sum into the shared `total` without
 * synchronization, unless `watched` says the sanitizer is looking. */
void reduce(long n, const double *restrict x, const double *restrict y, double *restrict result) {
    const int watched = slow_memory();
    double total = 0.0;
#pragma omp parallel
    {
        double s = 0.0;
#pragma omp for schedule(static)
        for (long i = 0; i < n; i++) s += x[i] * y[i];
        if (watched) {
#pragma omp atomic
            total += s;
        } else {
            total += s;
        }
    }
    *result = total;
}
