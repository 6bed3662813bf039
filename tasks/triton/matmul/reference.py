import torch
import torch.nn as nn

# The reference is full float32 (torch's default for matmul; stated here so that it does not depend on it).
torch.backends.cuda.matmul.allow_tf32 = False


class Model(nn.Module):
    """C = A @ B for float32 A (M, K) and B (K, N)."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


M = 2048
N = 2048
K = 2048


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
