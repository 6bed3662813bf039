import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Device code only (no torch headers): kernels and a launcher taking raw pointers.
# Deliberately naive start: one element per thread in tiny 32-thread blocks.
CUDA_SRC = r"""
#include <cuda_runtime.h>

#define BLOCK 32

__global__ void relu_kernel(const float *x, float *y, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void relu_launch(const float *x, float *y, long n, cudaStream_t stream) {
    if (n <= 0) return;
    relu_kernel<<<(unsigned)((n + BLOCK - 1) / BLOCK), BLOCK, 0, stream>>>(x, y, n);
}
"""

# The torch glue: checks, output allocation, the current stream.
CPP_SRC = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

void relu_launch(const float *x, float *y, long n, cudaStream_t stream);

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "relu_forward: x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "relu_forward: x must be float32");
    torch::Tensor xc = x.contiguous();
    torch::Tensor y = torch::empty_like(xc);
    relu_launch(xc.data_ptr<float>(), y.data_ptr<float>(), xc.numel(), c10::cuda::getCurrentCUDAStream().stream());
    return y;
}
"""

relu_ext = load_inline(name="kernopt_cuda_relu", cpp_sources=[CPP_SRC], cuda_sources=[CUDA_SRC], functions=["relu_forward"],
                       extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu_ext.relu_forward(x)
