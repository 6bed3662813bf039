import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Device code only (no torch headers): kernels and a launcher taking raw pointers.
# Deliberately naive start: one thread per row makes three passes over it (mean, variance, write),
# so neighbouring threads read addresses `dim` floats apart.
CUDA_SRC = r"""
#include <cuda_runtime.h>

#define BLOCK 64

__global__ void layernorm_rows(const float *x, const float *w, const float *b, float *y, long rows, long cols, float eps) {
    long r = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float *in = x + r * cols;
    float *out = y + r * cols;
    float mean = 0.0f;
    for (long j = 0; j < cols; j++) mean += in[j];
    mean /= (float)cols;
    float var = 0.0f;
    for (long j = 0; j < cols; j++) {
        float d = in[j] - mean;
        var += d * d;
    }
    var /= (float)cols;
    float inv = rsqrtf(var + eps);
    for (long j = 0; j < cols; j++) out[j] = (in[j] - mean) * inv * w[j] + b[j];
}

void layernorm_launch(const float *x, const float *w, const float *b, float *y, long rows, long cols, float eps, cudaStream_t stream) {
    if (rows <= 0 || cols <= 0) return;
    layernorm_rows<<<(unsigned)((rows + BLOCK - 1) / BLOCK), BLOCK, 0, stream>>>(x, w, b, y, rows, cols, eps);
}
"""

# The torch glue: checks, output allocation, the current stream.
CPP_SRC = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

void layernorm_launch(const float *x, const float *w, const float *b, float *y, long rows, long cols, float eps, cudaStream_t stream);

torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 2, "layernorm_forward: x must be a 2-D CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32,
                "layernorm_forward: x, weight and bias must be float32");
    TORCH_CHECK(w.numel() == x.size(1) && b.numel() == x.size(1), "layernorm_forward: weight and bias must have dim elements");
    torch::Tensor xc = x.contiguous();
    torch::Tensor wc = w.contiguous();
    torch::Tensor bc = b.contiguous();
    torch::Tensor y = torch::empty_like(xc);
    layernorm_launch(xc.data_ptr<float>(), wc.data_ptr<float>(), bc.data_ptr<float>(), y.data_ptr<float>(), xc.size(0), xc.size(1),
                     (float)eps, c10::cuda::getCurrentCUDAStream().stream());
    return y;
}
"""

layernorm_ext = load_inline(name="kernopt_cuda_layernorm", cpp_sources=[CPP_SRC], cuda_sources=[CUDA_SRC],
                            functions=["layernorm_forward"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.ln = nn.LayerNorm(dim)  # holds the parameters (initialized like the reference's); never called

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return layernorm_ext.layernorm_forward(x, self.ln.weight, self.ln.bias, self.ln.eps)
