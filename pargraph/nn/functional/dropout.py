"""``torch.nn.functional``'s dropouts: elementwise, of whole channels, and alpha dropout."""

from __future__ import annotations

import math
from typing import Any

from pargraph._tensor import Tensor
from pargraph.factories import as_tensor, default_generator, drawn
from pargraph.nn.functional.activation import in_place


def dropout(input: Tensor, p: float = 0.5, training: bool = True,
            inplace: bool = False) -> Tensor:
    """Zero elements with probability ``p`` and scale the rest by 1/(1-p) (in training only;
    ``inplace``: ``input`` takes the result, as in PyTorch).

    The mask comes from the generator seeded by ``pargraph.manual_seed``.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.dropout(pargraph.ones(3), p=0.5, training=False)
    tensor([1., 1., 1.])
    """
    _check_probability(p)
    if not training or p == 0:
        return input
    if p == 1:
        return in_place(input, input * 0.0, inplace)
    shape, dtype = input.shape, input.dtype
    return in_place(input, input * drawn(lambda: ((default_generator().random(shape) >= p)
                                                  / (1 - p)).astype(dtype)), inplace)


def _check_probability(p: float) -> None:
    """PyTorch's check of a dropout probability (the functions' and the modules')."""
    if not 0 <= p <= 1:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _kept(shape: tuple, p: float, dtype: Any) -> Tensor:
    """A drawn mask of ``shape``: 1 where an element (or channel) is kept, with probability
    ``1 - p``, 0 where it is dropped."""
    return drawn(lambda: (default_generator().random(shape) >= p).astype(dtype))


def _channel_mask(input: Tensor, p: float, spatial: int, op: str) -> Tensor:
    """:func:`_kept` for whole channels: shape (N, C, 1, ...) for batched input, (C, 1, ...)
    for unbatched."""
    if input.ndim not in (spatial + 1, spatial + 2):
        raise RuntimeError(f"{op}: Expected {spatial + 1}D or {spatial + 2}D input, but "
                           f"received a {input.ndim}D input")
    channels = tuple(input.shape[:input.ndim - spatial])
    return _kept(channels + (1,) * spatial, p, input.dtype)


def _channel_dropout(input: Tensor, p: float, training: bool, spatial: int, op: str) -> Tensor:
    _check_probability(p)
    input = as_tensor(input)
    if not training or p == 0:
        return input
    if p == 1:
        return input * 0.0
    return input * (_channel_mask(input, p, spatial, op) / (1 - p))


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Zero whole channels of ``(N, C, L)`` or ``(C, L)`` input with probability ``p``.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.dropout1d(pargraph.ones(1, 2, 3), training=False).sum().item()
    6.0
    """
    return in_place(input, _channel_dropout(input, p, training, 1, "dropout1d"), inplace)


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Zero whole channels of ``(N, C, H, W)`` or ``(C, H, W)`` input with probability ``p``.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.dropout2d(pargraph.ones(1, 2, 2, 2), p=0.0).sum().item()
    8.0
    """
    return in_place(input, _channel_dropout(input, p, training, 2, "dropout2d"), inplace)


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Zero whole channels of ``(N, C, D, H, W)`` or ``(C, D, H, W)`` input.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.dropout3d(pargraph.ones(1, 1, 1, 1, 1), p=0.0).item()
    1.0
    """
    return in_place(input, _channel_dropout(input, p, training, 3, "dropout3d"), inplace)


#: SELU's -scale * alpha: the value alpha dropout sets dropped elements to.
_SELU_NEGATIVE = 1.7580993408473766


def _alpha_dropout(input: Tensor, p: float, training: bool, mask: Any) -> Tensor:
    """PyTorch's alpha dropout: dropped values become SELU's negative saturation, and an affine
    map keeps the mean and variance of a unit normal input."""
    _check_probability(p)
    input = as_tensor(input)
    if not training or p == 0:
        return input
    if p == 1:
        return input * 0.0
    a = 1.0 / math.sqrt((_SELU_NEGATIVE ** 2 * p + 1) * (1 - p))
    keep = mask(input)
    return input * (keep * a) + ((keep - 1) * (_SELU_NEGATIVE * a) + _SELU_NEGATIVE * a * p)


def alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False,
                  inplace: bool = False) -> Tensor:
    """Dropout for SELU networks: elements dropped with probability ``p`` (in training only).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.alpha_dropout(pargraph.ones(3)).tolist()  # training=False, as PyTorch's default
    [1.0, 1.0, 1.0]
    """
    return in_place(input, _alpha_dropout(input, p, training,
                                          lambda x: _kept(tuple(x.shape), p, x.dtype)), inplace)


def feature_alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False,
                          inplace: bool = False) -> Tensor:
    """Alpha dropout of whole channels (dimension 1 of batched input).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.feature_alpha_dropout(pargraph.ones(1, 2, 2), training=True, p=0.0).sum().item()
    4.0
    """
    def mask(x: Tensor) -> Tensor:
        if x.ndim < 2:
            raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
        return _kept(tuple(x.shape[:2]) + (1,) * (x.ndim - 2), p, x.dtype)
    return in_place(input, _alpha_dropout(input, p, training, mask), inplace)
