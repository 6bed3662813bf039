// Harness for saxpy (cuda-c): host buffers for the driver, device copies for the kernel.
// The driver uploads x and y after ko_fill, times ko_call plus a device synchronize, and downloads
// both afterwards (x too, so a kernel that writes its input is caught by the input checksum).
#include <stdlib.h>
#include "kernopt.h"

extern "C" void launch_saxpy(long n, float a, const float *x, float *y);

static float *x, *y, *dx, *dy;
static float alpha;

int ko_setup(long n, ko_buf *bufs) {
    free(x); free(y);
    if (dx) KO_CUDA_CHECK(cudaFree(dx));
    if (dy) KO_CUDA_CHECK(cudaFree(dy));
    x = (float *)malloc(n * sizeof *x);
    y = (float *)malloc(n * sizeof *y);
    KO_CUDA_CHECK(cudaMalloc(&dx, n * sizeof *dx));
    KO_CUDA_CHECK(cudaMalloc(&dy, n * sizeof *dy));
    bufs[0] = ko_buf{"x", KO_F32, KO_IN, (size_t)n, x, dx};
    bufs[1] = ko_buf{"y", KO_F32, KO_INOUT, (size_t)n, y, dy};
    return 2;
}

void ko_fill(long n, uint64_t seed) {
    uint64_t s = seed;
    alpha = (float)ko_rng_uniform(&s, 0.5, 2.0);
    for (long i = 0; i < n; i++) x[i] = (float)ko_rng_uniform(&s, -1.0, 1.0);
    for (long i = 0; i < n; i++) y[i] = (float)ko_rng_uniform(&s, -1.0, 1.0);
}

void ko_call(long n) { launch_saxpy(n, alpha, dx, dy); }
