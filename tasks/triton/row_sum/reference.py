import torch
import torch.nn as nn


class Model(nn.Module):
    """Sum of each row of a float32 matrix: (rows, cols) -> (rows,)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=1)


rows = 4096
cols = 16384


def get_inputs():
    # mean 1: row sums stay far from zero, where a relative comparison of a reordered sum is ill-conditioned
    return [torch.randn(rows, cols) + 1.0]


def get_init_inputs():
    return []
