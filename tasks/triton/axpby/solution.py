import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_SIZE = 32
NUM_WARPS = 4


@triton.jit
def axpby_kernel(x_ptr, y_ptr, out_ptr, alpha, beta, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, alpha * x + beta * y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, alpha: float, beta: float):
        super().__init__()
        self.alpha = alpha
        self.beta = beta

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        n = x.numel()
        # one tiny 32-element block per program: far too little work per program for a GPU
        axpby_kernel[(triton.cdiv(n, BLOCK_SIZE),)](x, y, out, self.alpha, self.beta, n, BLOCK=BLOCK_SIZE, num_warps=NUM_WARPS)
        return out
