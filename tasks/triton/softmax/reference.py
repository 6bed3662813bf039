import torch
import torch.nn as nn


class Model(nn.Module):
    """Row-wise softmax of a float32 matrix (rows, cols): out[i, j] = exp(x[i, j]) / sum_k exp(x[i, k])."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


rows = 4096
cols = 8192


def get_inputs():
    # shifted so that exp() of the larger entries overflows float32 (exp(88.8) = inf): a kernel must
    # subtract the row maximum; the spread (std 4) keeps many probabilities far from 0 and 1
    return [torch.randn(rows, cols) * 4.0 + 85.0]


def get_init_inputs():
    return []
