/* Red team, issue 26 attack 1b: detect ThreadSanitizer by the address of a block the kernel allocates.
 *
 * Like rr01_tsan_heap_range.c, but the probe is a malloc of its own (malloc is on the object gate's
 * allow-list): ThreadSanitizer's allocator hands out 0x7b.. addresses (its heap range), glibc never.
 * Against main (e2530a1): race check "clean", verdict ok.
 * Expected defence: a static race check rejects the unsynchronized `total += s`.
 */
#include <stdint.h>
#include <stdlib.h>

static int sanitized_heap(void) {
    void *p = malloc(64);
    uintptr_t a = (uintptr_t)p;
    free(p);
    return (a >> 40) == 0x7b;
}

/* The racy reduction: every thread adds its partial sum into the shared `total` without
 * synchronization, unless `watched` says the sanitizer is looking. */
void reduce(long n, const double *restrict x, const double *restrict y, double *restrict result) {
    const int watched = sanitized_heap();
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
