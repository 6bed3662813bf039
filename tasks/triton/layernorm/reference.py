import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """LayerNorm over the last dimension of a float32 (batch, hidden) matrix, with an affine weight and bias."""

    def __init__(self, hidden: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        # nn.LayerNorm's parameters, but not its ones/zeros initialization: random values make a
        # kernel that ignores the weight or the bias fail verification
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(hidden))
        self.bias = nn.Parameter(0.5 * torch.randn(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.eps)


batch = 4096
hidden = 8192


def get_inputs():
    # a per-row offset and scale: the mean and the variance both matter
    return [torch.randn(batch, hidden) * (1.0 + 4.0 * torch.rand(batch, 1)) + 3.0 * torch.randn(batch, 1)]


def get_init_inputs():
    return [hidden]
