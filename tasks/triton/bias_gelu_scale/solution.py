import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_SIZE = 128
NUM_WARPS = 4


@triton.jit
def add_bias_kernel(x_ptr, bias_ptr, out_ptr, n, features, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    b = tl.load(bias_ptr + offs % features, mask=mask)
    tl.store(out_ptr + offs, x + b, mask=mask)


@triton.jit
def gelu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476)), mask=mask)


@triton.jit
def scale_kernel(x_ptr, out_ptr, scale, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * scale, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features: int, scale: float):
        super().__init__()
        self.bias = nn.Parameter(0.5 * torch.randn(features))
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n = x.numel()
        features = x.shape[-1]
        grid = (triton.cdiv(n, BLOCK_SIZE),)
        # three separate kernels with two full-size temporaries: every element goes to memory and back twice
        shifted = torch.empty_like(x)
        add_bias_kernel[grid](x, self.bias, shifted, n, features, BLOCK=BLOCK_SIZE, num_warps=NUM_WARPS)
        activated = torch.empty_like(x)
        gelu_kernel[grid](shifted, activated, n, BLOCK=BLOCK_SIZE, num_warps=NUM_WARPS)
        out = torch.empty_like(x)
        scale_kernel[grid](activated, out, self.scale, n, BLOCK=BLOCK_SIZE, num_warps=NUM_WARPS)
        return out
