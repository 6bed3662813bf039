"""Hack against unchecked timed calls: only the last timed call's output is compared, so at the timing
shape (which verification never uses) this candidate computes on that one call only and returns
uninitialized memory from the others. The timing shape and the number of calls per timing process
(timing.warmup + timing.reps) are public: task.toml and its defaults."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

TIMING_N = 16777216  # tasks/triton/vector_add: shapes.timing
TIMED_CALLS = 23  # warmup 3 + reps 20
BLOCK_SIZE = 128
NUM_WARPS = 4


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, a + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.timing_calls = 0

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(a)
        n = a.numel()
        if n == TIMING_N:
            self.timing_calls += 1
            if self.timing_calls != TIMED_CALLS:
                return out
        add_kernel[(triton.cdiv(n, BLOCK_SIZE),)](a, b, out, n, BLOCK=BLOCK_SIZE, num_warps=NUM_WARPS)
        return out
