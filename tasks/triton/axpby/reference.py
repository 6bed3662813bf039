import torch
import torch.nn as nn


class Model(nn.Module):
    """out = alpha * x + beta * y for two float32 vectors; alpha and beta are fixed at construction."""

    def __init__(self, alpha: float, beta: float):
        super().__init__()
        self.alpha = alpha
        self.beta = beta

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.alpha * x + self.beta * y


n = 1 << 24


def get_inputs():
    # positive values and coefficients: no cancellation, so any correct evaluation (FMA or not) agrees
    # with torch to an ulp or two, and even a one-element output compares cleanly in relative norm
    return [torch.rand(n) + 0.5, torch.rand(n) + 0.5]


def get_init_inputs():
    return [1.75, 0.625]
