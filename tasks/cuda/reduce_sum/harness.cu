// Harness for reduce_sum (cuda-c): x (n floats in [0, 1)) in, one double out.
#include <stdlib.h>
#include "kernopt.h"

extern "C" void launch_reduce_sum(long n, const float *x, double *out);

static float *x, *dx;
static double out, *dout;

int ko_setup(long n, ko_buf *bufs) {
    free(x);
    if (dx) KO_CUDA_CHECK(cudaFree(dx));
    if (!dout) KO_CUDA_CHECK(cudaMalloc(&dout, sizeof *dout));
    x = (float *)malloc(n * sizeof *x);
    KO_CUDA_CHECK(cudaMalloc(&dx, n * sizeof *dx));
    bufs[0] = ko_buf{"x", KO_F32, KO_IN, (size_t)n, x, dx};
    bufs[1] = ko_buf{"sum", KO_F64, KO_OUT, 1, &out, dout};
    return 2;
}

void ko_fill(long n, uint64_t seed) {
    uint64_t s = seed;
    for (long i = 0; i < n; i++) x[i] = (float)ko_rng_uniform(&s, 0.0, 1.0);
}

void ko_call(long n) { launch_reduce_sum(n, dx, dout); }
