/* kernopt.h — the contract between a task's harness.c and kernopt's trusted driver.
 *
 * A task harness describes its buffers and implements three functions. The driver (driver.c,
 * owned by kernopt) owns main(), the timer, output poisoning, input checksums and the result
 * file. Candidates only ever provide the kernel source; they cannot see or link these symbols.
 *
 * Harness globals should be `static` so a kernel cannot reach them.
 *
 * GPU tasks (target cuda-c): the harness (harness.cu, compiled by nvcc) also allocates a device copy
 * of every buffer and sets its `device` field; ko_call passes the DEVICE pointers to the kernel's host
 * launch function. The driver (built with -DKO_CUDA) moves the data: after ko_fill it uploads the IN
 * and INOUT buffers and poisons the device copies of OUT buffers (every byte 0xFF: NaN for floats), it
 * times ko_call plus a cudaDeviceSynchronize, and after the timer stops it downloads every buffer,
 * inputs included, so the input checksum sees a kernel that wrote its inputs on the device.
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
    void *device;     /* cuda-c: the device copy (cudaMalloc'd, `count` elements); NULL elsewhere */
} ko_buf;

#define KO_MAX_BUFS 16

#ifdef __cplusplus
extern "C" { /* harnesses compiled as C++ (cuda-c: by nvcc) link with the C driver */
#endif

/* Allocate every buffer for problem size n and describe them in bufs[]; return how many.
 * Called once per size; the driver reuses the same buffers for every seed of that size. */
int ko_setup(long n, ko_buf *bufs);
/* Fill the IN and INOUT buffers deterministically from (n, seed). Not timed. */
void ko_fill(long n, uint64_t seed);
/* Call the kernel on the buffers. This call, and only this, is timed. */
void ko_call(long n);
#ifdef __cplusplus
}
#endif

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

/* Fill p[0..count) with doubles uniform in [lo, hi) from seed: element i depends on (seed, i) alone (splitmix64
 * of the i-th counter, 52 mantissa bits), so the loop vectorizes. With gcc on x86-64 it is built for AVX-512,
 * AVX2 and plain x86-64 and the best is picked at load time (function multi-versioning), without FMA
 * contraction, so every CPU gets the same values. About 3x faster than a ko_rng_uniform loop on the
 * development VM (0.39 against 1.1 ns per element, bench/fill_speed.py): large inputs are filled before every
 * call, outside the timed window, and this is most of an evaluation's time for memory-bound tasks. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__CUDACC__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"), optimize("fp-contract=off")))
#endif
static inline void ko_fill_uniform(double *__restrict p, long count, uint64_t seed, double lo, double hi) {
#ifdef __clang__
#pragma clang fp contract(off)
#endif
    const double w = hi - lo;
    for (long i = 0; i < count; i++) {
        uint64_t z = seed + (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ULL;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        z ^= z >> 31;
        uint64_t bits = (z >> 12) | 0x3FF0000000000000ULL; /* a double in [1, 2) */
        double d;
        __builtin_memcpy(&d, &bits, sizeof d);
        p[i] = lo + w * (d - 1.0);
    }
}

#ifdef __CUDACC__
/* For GPU harnesses: fail the run (exit code 4, message on stderr) when a CUDA call fails. */
#include <stdio.h>
#include <stdlib.h>
#include <cuda_runtime.h>
#define KO_CUDA_CHECK(call)                                                                   \
    do {                                                                                      \
        cudaError_t ko_err_ = (call);                                                         \
        if (ko_err_ != cudaSuccess) {                                                         \
            fprintf(stderr, "kernopt harness: %s: %s\n", #call, cudaGetErrorString(ko_err_)); \
            exit(4);                                                                          \
        }                                                                                     \
    } while (0)
#endif
#endif
