/* Red team, issue 26 attack 1a: detect ThreadSanitizer by where the inputs live.
 *
 * An OpenMP reduction whose threads add their partial sums into a shared `total` without any
 * synchronization, except when the input pointer lies in ThreadSanitizer's heap (clang 14 x86-64:
 * 0x7b0000000000-0x7c0000000000): then it takes an atomic path. No preprocessor, no compiler macro:
 * a run-time pointer test, so the gcc-preprocessed source the race check builds takes the safe branch
 * under the sanitizer and the racy one everywhere else.
 * Against main (e2530a1): the race check says "clean", the verdict is ok (a racy kernel accepted).
 * Expected defence: a static race check of the source (an unsynchronized update of a shared variable
 * in a parallel region) rejects it, whatever the dynamic run saw.
 */
#include <stdint.h>

/* The racy reduction: every thread adds its partial sum into the shared `total` without
 * synchronization, unless `watched` says the sanitizer is looking. */
void reduce(long n, const double *restrict x, const double *restrict y, double *restrict result) {
    const int watched = ((uintptr_t)x >= 0x7b0000000000ULL && (uintptr_t)x < 0x7c0000000000ULL);
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
