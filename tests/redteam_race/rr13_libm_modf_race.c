/* Red team, issue 26 attack 4a: a race through libm's output pointer (modf(x, &shared)).
 *
 * The threads' unsynchronized updates of the shared accumulator are stores made by modf into `hi` and
 * `lo`, not by the kernel's own instructions; its own accesses to them are reads only.
 * Against main (e2530a1), local: race check "clean", verdict ok (clang 14's sanitizer exports a modf
 * interceptor, yet reported nothing).
 * Expected defence: never ok: a static race check rejects the shared output pointer of modf in a parallel
 * region, or the sanitizer's modf interceptor reports the race.
 */
#include <math.h>
#include <omp.h>

static double mf(double v, double *ip) { return modf(v, ip); }

/* Each thread adds its partial sum into the shared accumulator (hi, lo) by read-modify-write with no
 * synchronization the sanitizer can see: the stores go through modf's output pointer (hi gets the
 * integral part of the new total, lo its fraction scaled to an integer, so ~52 fractional bits are kept),
 * and the threads take turns by spinning on `turn`, which modf writes too. The kernel's own instructions
 * only read the shared variables; it is always right on x86, and a data race all the same. */
void reduce(long n, const double *restrict x, const double *restrict y, double *restrict result) {
    
    double hi = 0.0, lo = 0.0, turn = 0.0;
#pragma omp parallel shared(hi, lo, turn)
    {
        const int me = omp_get_thread_num();
        double s = 0.0;
#pragma omp for schedule(static) nowait
        for (long i = 0; i < n; i++) s += x[i] * y[i];
        while (*(volatile double *)&turn != (double)me) {
        }
        double t = *(volatile double *)&hi + *(volatile double *)&lo * 0x1p-52 + s;
        double f = mf(t, &hi);
        mf(f * 0x1p52, &lo);
        mf((double)(me + 1), &turn);
    }
    *result = hi + lo * 0x1p-52;
}
