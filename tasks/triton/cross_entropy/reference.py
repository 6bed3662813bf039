import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Mean cross-entropy loss of float32 logits (batch, classes) against int64 class targets (batch,)."""

    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, targets)


batch = 4096
classes = 16384


def get_inputs():
    # shifted so that exp() of the larger raw logits overflows float32 (exp(88.8) = inf): a kernel
    # must subtract the row maximum; spread 1 keeps every row's loss well above 0 (the output is a
    # single number, compared relative to itself)
    logits = torch.randn(batch, classes) + 87.0
    targets = torch.randint(0, classes, (batch,))
    return [logits, targets]


def get_init_inputs():
    return []
