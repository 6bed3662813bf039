import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# The reference is full float32: on a GPU, torch lets cuDNN run float32 convolutions in TF32 by
# default (~1e-3 relative error), which would make the truth less accurate than the tolerance.
torch.backends.cudnn.allow_tf32 = False


class Model(nn.Module):
    """1-D convolution (stride 1, no padding, no dilation) with bias, float32:
    x (batch, in_channels, length) -> (batch, out_channels, length - kernel_size + 1)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        bound = 1.0 / math.sqrt(in_channels * kernel_size)  # nn.Conv1d's default range
        self.weight = nn.Parameter(torch.empty(out_channels, in_channels, kernel_size).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(out_channels).uniform_(-bound, bound))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.conv1d(x, self.weight, self.bias)


batch = 32
in_channels = 64
out_channels = 128
length = 8192
kernel_size = 7


def get_inputs():
    return [torch.randn(batch, in_channels, length)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
