import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_SIZE = 32
NUM_WARPS = 4
NUM_STAGES = 1


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, cols, stride_row, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = x_ptr + row.to(tl.int64) * stride_row
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    # walk the row in small chunks: a long serial loop of 32-element loads per program
    for start in range(0, cols, BLOCK):
        acc += tl.load(base + start + offs, mask=start + offs < cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty((rows,), dtype=x.dtype, device=x.device)
        row_sum_kernel[(rows,)](x, out, cols, x.stride(0), BLOCK=BLOCK_SIZE, num_warps=NUM_WARPS, num_stages=NUM_STAGES)
        return out
