// reduce_sum: *out = x[0] + ... + x[n-1] (float32 in, double out). x and out are device pointers.
// Deliberately naive start: one double atomicAdd per element, all on the same address.
#ifndef BLOCK
#define BLOCK 256
#endif

__global__ void sum_atomic(long n, const float *x, double *out) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(out, (double)x[i]);
}

extern "C" void launch_reduce_sum(long n, const float *x, double *out) {
    cudaMemsetAsync(out, 0, sizeof(double));
    if (n <= 0) return;
    sum_atomic<<<(unsigned)((n + BLOCK - 1) / BLOCK), BLOCK>>>(n, x, out);
}
