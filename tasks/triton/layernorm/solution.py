import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_SIZE = 64
NUM_WARPS = 4
NUM_STAGES = 1


@triton.jit
def layernorm_row_kernel(x_ptr, w_ptr, b_ptr, out_ptr, hidden, stride_row, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row.to(tl.int64) * stride_row
    out_row = out_ptr + row.to(tl.int64) * stride_row
    offs = tl.arange(0, BLOCK)
    # pass 1: mean (lane-wise partial sums, reduced after the loop)
    lane_sum = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, hidden, BLOCK):
        lane_sum += tl.load(x_row + start + offs, mask=start + offs < hidden, other=0.0)
    mean = tl.sum(lane_sum, axis=0) / hidden
    # pass 2: biased variance (reads the row again)
    lane_sq = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, hidden, BLOCK):
        mask = start + offs < hidden
        vals = tl.load(x_row + start + offs, mask=mask, other=0.0)
        diff = tl.where(mask, vals - mean, 0.0)
        lane_sq += diff * diff
    rstd = 1.0 / tl.sqrt(tl.sum(lane_sq, axis=0) / hidden + eps)
    # pass 3: normalize, scale and shift (reads the row a third time)
    for start in range(0, hidden, BLOCK):
        mask = start + offs < hidden
        vals = tl.load(x_row + start + offs, mask=mask, other=0.0)
        w = tl.load(w_ptr + start + offs, mask=mask, other=0.0)
        b = tl.load(b_ptr + start + offs, mask=mask, other=0.0)
        tl.store(out_row + start + offs, (vals - mean) * rstd * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(hidden))
        self.bias = nn.Parameter(0.5 * torch.randn(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        batch, hidden = x.shape
        out = torch.empty_like(x)
        layernorm_row_kernel[(batch,)](x, self.weight, self.bias, out, hidden, x.stride(0), self.eps,
                                       BLOCK=BLOCK_SIZE, num_warps=NUM_WARPS, num_stages=NUM_STAGES)
        return out
