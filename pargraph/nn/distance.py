"""Distances and similarities between tensors: ``normalize``, ``cosine_similarity``,
``pairwise_distance`` and their modules, with PyTorch's formulas and ``eps`` handling."""

from __future__ import annotations

from pargraph._tensor import Tensor
from pargraph.factories import as_tensor
from pargraph.nn.module import Module


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12,
              out: Tensor | None = None) -> Tensor:
    """``input / max(||input||_p, eps)`` along ``dim``.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.normalize(pargraph.tensor([[3.0, 4.0]])).tolist()
    [[0.6000000238418579, 0.800000011920929]]
    """
    x = as_tensor(input)
    return x / x.norm(p, dim, keepdim=True).clamp(min=eps).expand_as(x)


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


class CosineSimilarity(Module):
    """:func:`cosine_similarity` as a module.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.CosineSimilarity(dim=0)(pargraph.ones(3), pargraph.ones(3)).tolist()
    1.0
    """

    def __init__(self, dim: int = 1, eps: float = 1e-8) -> None:
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """:func:`pairwise_distance` as a module.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.PairwiseDistance(eps=0.0)(pargraph.ones(1, 4), pargraph.zeros(1, 4)).tolist()
    [2.0]
    """

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> None:
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)
