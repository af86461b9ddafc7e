"""``CosineSimilarity`` and ``PairwiseDistance``."""

from __future__ import annotations

from pargraph._tensor import Tensor
from pargraph.nn.functional.distance import cosine_similarity, pairwise_distance
from pargraph.nn.module import Module


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
