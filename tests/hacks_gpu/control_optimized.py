"""Control: an optimized, correct vector_add: 4096-element blocks, vectorizable contiguous accesses
(multiple_of hints) and more warps per program."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_SIZE = 4096
NUM_WARPS = 8


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    offs = tl.max_contiguous(tl.multiple_of(offs, BLOCK), BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, a + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty_like(a)
        n = out.numel()
        add_kernel[(triton.cdiv(n, BLOCK_SIZE),)](a, b, out, n, BLOCK=BLOCK_SIZE, num_warps=NUM_WARPS)
        return out
