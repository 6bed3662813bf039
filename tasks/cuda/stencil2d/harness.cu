// Harness for stencil2d (cuda-c): an n x n grid in, one Jacobi sweep of it out.
#include <stdlib.h>
#include "kernopt.h"

extern "C" void launch_stencil2d(long n, const float *in, float *out);

static float *a, *b, *da, *db;

int ko_setup(long n, ko_buf *bufs) {
    size_t count = (size_t)n * (size_t)n;
    free(a); free(b);
    if (da) KO_CUDA_CHECK(cudaFree(da));
    if (db) KO_CUDA_CHECK(cudaFree(db));
    a = (float *)malloc(count * sizeof *a);
    b = (float *)malloc(count * sizeof *b);
    KO_CUDA_CHECK(cudaMalloc(&da, count * sizeof *da));
    KO_CUDA_CHECK(cudaMalloc(&db, count * sizeof *db));
    bufs[0] = ko_buf{"in", KO_F32, KO_IN, count, a, da};
    bufs[1] = ko_buf{"out", KO_F32, KO_OUT, count, b, db};
    return 2;
}

void ko_fill(long n, uint64_t seed) {
    uint64_t s = seed;
    for (long i = 0; i < n * n; i++) a[i] = (float)ko_rng_uniform(&s, -1.0, 1.0);
}

void ko_call(long n) { launch_stencil2d(n, da, db); }
