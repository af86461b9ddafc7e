"""Dropout layers."""

from __future__ import annotations

from pargraph._tensor import Tensor
from pargraph.nn import functional as F
from pargraph.nn.functional.dropout import _check_probability
from pargraph.nn.module import Module


class Dropout(Module):
    """Zero elements with probability ``p`` in training mode; the identity in eval mode.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Dropout(0.5).eval()(pargraph.ones(2))
    tensor([1., 1.])
    """

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        _check_probability(p)
        self.p, self.inplace = p, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class _DropoutNd(Module):
    """Zero whole channels (dimension 1 of a batched input) with probability ``p``."""

    spatial = 1

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        _check_probability(p)
        self.p, self.inplace = p, inplace

    def forward(self, input: Tensor) -> Tensor:
        return getattr(F, f"dropout{self.spatial}d")(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class AlphaDropout(_DropoutNd):
    """Dropout for SELU networks: dropped elements take SELU's negative saturation value and
    an affine map keeps a unit normal input's mean and variance (in training only).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.AlphaDropout(0.2).eval()(pargraph.ones(3)).tolist()
    [1.0, 1.0, 1.0]
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.alpha_dropout(input, self.p, self.training, self.inplace)


class FeatureAlphaDropout(_DropoutNd):
    """Alpha dropout of whole channels.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.FeatureAlphaDropout(0.0)(pargraph.ones(1, 2, 2)).sum().item()
    4.0
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.feature_alpha_dropout(input, self.p, self.training, self.inplace)


class Dropout1d(_DropoutNd):
    """Zero whole channels of ``(N, C, L)`` (or ``(C, L)``) inputs, scaling the rest.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Dropout1d(0.5).eval()(pargraph.ones(1, 2, 3)).sum().item()
    6.0
    """

    spatial = 1


class Dropout2d(_DropoutNd):
    """Zero whole channels of ``(N, C, H, W)`` (or ``(C, H, W)``) inputs, scaling the rest.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Dropout2d(0.0)(pargraph.ones(1, 2, 2, 2)).sum().item()
    8.0
    """

    spatial = 2


class Dropout3d(_DropoutNd):
    """Zero whole channels of ``(N, C, D, H, W)`` (or ``(C, D, H, W)``) inputs.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Dropout3d(0.0)(pargraph.ones(1, 1, 1, 1, 1)).item()
    1.0
    """

    spatial = 3
