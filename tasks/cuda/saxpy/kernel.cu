// saxpy: y[i] = a * x[i] + y[i], float32, on the GPU. x and y are device pointers.
// Deliberately naive start: a single block of BLOCK threads strides over the whole array.
#ifndef BLOCK
#define BLOCK 128
#endif
#ifndef GRID
#define GRID 1
#endif

__global__ void saxpy_kernel(long n, float a, const float *x, float *y) {
    long stride = (long)gridDim.x * blockDim.x;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] = a * x[i] + y[i];
}

extern "C" void launch_saxpy(long n, float a, const float *x, float *y) {
    if (n <= 0) return;
    saxpy_kernel<<<GRID, BLOCK>>>(n, a, x, y);
}
