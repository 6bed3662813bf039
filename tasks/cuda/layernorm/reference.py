import torch
import torch.nn as nn


class Model(nn.Module):
    """Layer normalization over the last dimension of a float32 (batch_size x dim) matrix."""

    def __init__(self, dim: int):
        super().__init__()
        self.ln = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


batch_size = 16
dim = 4096


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim]
