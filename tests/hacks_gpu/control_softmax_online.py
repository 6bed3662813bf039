"""Control (tests/data/softmax_rows, tasks/triton/softmax): an optimized, correct softmax. One pass computes the row maximum
and the sum of exponentials together (online rescaling), a second pass normalizes; several rows per
program; bigger blocks and more warps than the starting kernel."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_SIZE = 1024
NUM_WARPS = 8
ROWS_PER_PROGRAM = 2


@triton.jit
def softmax_online_kernel(x_ptr, out_ptr, rows, cols, stride_x, stride_out, BLOCK: tl.constexpr, ROWS: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    for r in range(ROWS):
        row = pid * ROWS + r
        if row < rows:
            x_row = x_ptr + row.to(tl.int64) * stride_x
            o_row = out_ptr + row.to(tl.int64) * stride_out
            m = tl.full((BLOCK,), -float("inf"), dtype=tl.float32)
            s = tl.zeros((BLOCK,), dtype=tl.float32)
            for start in range(0, cols, BLOCK):
                v = tl.load(x_row + start + offs, mask=start + offs < cols, other=-float("inf"))
                m_new = tl.maximum(m, v)
                m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)
                s = s * tl.exp(m - m_safe) + tl.exp(v - m_safe)
                m = m_new
            row_max = tl.max(m, axis=0)
            denom = tl.sum(s * tl.exp(m - row_max), axis=0)
            for start in range(0, cols, BLOCK):
                mask = start + offs < cols
                v = tl.load(x_row + start + offs, mask=mask, other=-float("inf"))
                tl.store(o_row + start + offs, tl.exp(v - row_max) / denom, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty_like(x)
        block = min(BLOCK_SIZE, triton.next_power_of_2(cols))
        grid = (triton.cdiv(rows, ROWS_PER_PROGRAM),)
        softmax_online_kernel[grid](x, out, rows, cols, x.stride(0), out.stride(0), BLOCK=block, ROWS=ROWS_PER_PROGRAM,
                                    num_warps=NUM_WARPS)
        return out
