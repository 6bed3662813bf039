// Harness for transpose (cuda-c): a rows x cols matrix in, its cols x rows transpose out,
// with rows = n and cols = 3n/2 + 1.
#include <stdlib.h>
#include "kernopt.h"

extern "C" void launch_transpose(long rows, long cols, const float *in, float *out);

static float *a, *t, *da, *dt;

static long cols_of(long n) { return 3 * n / 2 + 1; }

int ko_setup(long n, ko_buf *bufs) {
    size_t count = (size_t)n * (size_t)cols_of(n);
    free(a); free(t);
    if (da) KO_CUDA_CHECK(cudaFree(da));
    if (dt) KO_CUDA_CHECK(cudaFree(dt));
    a = (float *)malloc(count * sizeof *a);
    t = (float *)malloc(count * sizeof *t);
    KO_CUDA_CHECK(cudaMalloc(&da, count * sizeof *da));
    KO_CUDA_CHECK(cudaMalloc(&dt, count * sizeof *dt));
    bufs[0] = ko_buf{"in", KO_F32, KO_IN, count, a, da};
    bufs[1] = ko_buf{"out", KO_F32, KO_OUT, count, t, dt};
    return 2;
}

void ko_fill(long n, uint64_t seed) {
    uint64_t s = seed;
    size_t count = (size_t)n * (size_t)cols_of(n);
    for (size_t i = 0; i < count; i++) a[i] = (float)ko_rng_uniform(&s, -1.0, 1.0);
}

void ko_call(long n) { launch_transpose(n, cols_of(n), da, dt); }
