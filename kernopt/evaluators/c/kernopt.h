/* kernopt.h — the contract between a task's harness.c and kernopt's trusted driver.
 *
 * A task harness describes its buffers and implements three functions. The driver (driver.c,
 * owned by kernopt) owns main(), the timer, output poisoning, input checksums and the result
 * file. Candidates only ever provide the kernel source; they cannot see or link these symbols.
 *
 * Harness globals should be `static` so a kernel cannot reach them.
 */
#ifndef KERNOPT_H
#define KERNOPT_H
#include <stddef.h>
#include <stdint.h>

typedef enum { KO_F64 = 0, KO_F32 = 1, KO_I32 = 2, KO_I64 = 3, KO_U8 = 4 } ko_dtype;
typedef enum { KO_IN = 0, KO_OUT = 1, KO_INOUT = 2 } ko_role;

typedef struct {
    const char *name; /* buffer name, reported in errors */
    ko_dtype dtype;
    ko_role role;
    size_t count;     /* number of elements */
    void *data;
} ko_buf;

#define KO_MAX_BUFS 16

/* Allocate every buffer for problem size n and describe them in bufs[]; return how many.
 * Called once per size; the driver reuses the same buffers for every seed of that size. */
int ko_setup(long n, ko_buf *bufs);
/* Fill the IN and INOUT buffers deterministically from (n, seed). Not timed. */
void ko_fill(long n, uint64_t seed);
/* Call the kernel on the buffers. This call, and only this, is timed. */
void ko_call(long n);

/* A small deterministic generator harnesses may use: splitmix64 + uniform double in [lo, hi). */
static inline uint64_t ko_rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
static inline double ko_rng_uniform(uint64_t *s, double lo, double hi) {
    return lo + (hi - lo) * (double)(ko_rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
}
#endif
