import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Device code only (no torch headers): kernels and a launcher taking raw pointers.
# Deliberately naive start: one thread per row makes three passes over it (max, sum of exp, write),
# so neighbouring threads read addresses `dim` floats apart.
CUDA_SRC = r"""
#include <cuda_runtime.h>

#define BLOCK 64

__global__ void softmax_rows(const float *x, float *y, long rows, long cols) {
    long r = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float *in = x + r * cols;
    float *out = y + r * cols;
    float m = -INFINITY;
    for (long j = 0; j < cols; j++) m = fmaxf(m, in[j]);
    float s = 0.0f;
    for (long j = 0; j < cols; j++) s += expf(in[j] - m);
    float inv = 1.0f / s;
    for (long j = 0; j < cols; j++) out[j] = expf(in[j] - m) * inv;
}

void softmax_launch(const float *x, float *y, long rows, long cols, cudaStream_t stream) {
    if (rows <= 0 || cols <= 0) return;
    softmax_rows<<<(unsigned)((rows + BLOCK - 1) / BLOCK), BLOCK, 0, stream>>>(x, y, rows, cols);
}
"""

# The torch glue: checks, output allocation, the current stream.
CPP_SRC = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

void softmax_launch(const float *x, float *y, long rows, long cols, cudaStream_t stream);

torch::Tensor row_softmax(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 2, "row_softmax: x must be a 2-D CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "row_softmax: x must be float32");
    torch::Tensor xc = x.contiguous();
    torch::Tensor y = torch::empty_like(xc);
    softmax_launch(xc.data_ptr<float>(), y.data_ptr<float>(), xc.size(0), xc.size(1), c10::cuda::getCurrentCUDAStream().stream());
    return y;
}
"""

softmax_ext = load_inline(name="kernopt_cuda_softmax", cpp_sources=[CPP_SRC], cuda_sources=[CUDA_SRC], functions=["row_softmax"],
                          extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax_ext.row_softmax(x)
