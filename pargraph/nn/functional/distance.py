"""``torch.nn.functional``'s distances: cosine similarity and pairwise distance."""

from __future__ import annotations

from pargraph._tensor import Tensor
from pargraph.factories import as_tensor


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """``x1 . x2 / (max(||x1||, eps) max(||x2||, eps))`` along ``dim``, as PyTorch
    computes it (each norm clamped).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.cosine_similarity(pargraph.tensor([[1.0, 0.0]]), pargraph.tensor([[1.0, 1.0]])).tolist()
    [0.7071067690849304]
    """
    a, b = as_tensor(x1), as_tensor(x2)
    return (a * b).sum(dim) / (a.norm(2, dim).clamp(min=eps) * b.norm(2, dim).clamp(min=eps))


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> Tensor:
    """``||x1 - x2 + eps||_p`` along the last dimension.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.pairwise_distance(pargraph.tensor([[3.0, 4.0]]), pargraph.zeros(1, 2), eps=0.0).tolist()
    [5.0]
    """
    a, b = as_tensor(x1), as_tensor(x2)
    return (a - b + eps).norm(p, -1, keepdim=keepdim)
