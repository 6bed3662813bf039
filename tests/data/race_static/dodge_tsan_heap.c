/* Dodge (a): every thread adds into the shared `total` without synchronization, except when the input lies in
 * ThreadSanitizer's heap (clang 14 x86-64: 0x7b0000000000-0x7c0000000000): then it takes an atomic path. */
#include <stdint.h>

void reduce(long n, const double *restrict x, double *restrict out) {
    double total = 0.0;
    const int watched = ((uintptr_t)x >> 40) == 0x7b;
#pragma omp parallel for
    for (long i = 0; i < n; i++) {
        if (watched) {
#pragma omp atomic
            total += x[i];
        } else {
            total += x[i];
        }
    }
    *out = total;
}
