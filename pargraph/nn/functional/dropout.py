"""``torch.nn.functional``'s dropouts: elementwise, of whole channels, and alpha dropout."""

from __future__ import annotations

import math
import warnings
from typing import Any

from pargraph._tensor import Tensor
from pargraph.factories import as_tensor, default_generator, drawn
from pargraph.graph import user_stacklevel
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


#: What PyTorch says of a channel dropout given an input of other dimensions than its own.
_OTHER_DIMENSIONS = (
    "{op}: Received a {ndim}-D input to {op}, which is deprecated and will result in an error "
    "in a future release. To retain the behavior and silence this warning, please use dropout "
    "instead. Note that {op} exists to provide channel-wise dropout on inputs with {spatial} "
    "spatial dimensions, a channel dimension, and an optional batch dimension (i.e. {low}D or "
    "{high}D inputs).")
_THREE_D_TO_2D = (
    "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout "
    "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel dim. "
    "This behavior will change in a future release to interpret the input as one without a "
    "batch dimension, i.e. shape (C, H, W). To maintain the 1D channel-wise dropout behavior, "
    "please switch to using dropout1d instead.")


def _channels(input: Tensor, spatial: int, op: str) -> int:
    """How many leading dimensions a channel dropout draws its mask over, with PyTorch's
    warnings and errors: ``dropout1d`` takes (C, L) or (N, C, L) only; ``dropout2d`` masks
    the first two dimensions of any input of two or more (a 3-D one as (N, C, L));
    ``dropout3d`` treats all but 5-D input as unbatched, masking the first dimension."""
    ndim = input.ndim
    if spatial == 1:
        if ndim not in (2, 3):
            raise RuntimeError(
                f"dropout1d: Expected 2D or 3D input, but received a {ndim}D input. Note that "
                "dropout1d exists to provide channel-wise dropout on inputs with 1 spatial "
                "dimension, a channel dimension, and an optional batch dimension (i.e. 2D or "
                "3D inputs).")
        return ndim - 1
    if ndim not in (spatial + 1, spatial + 2):
        warnings.warn(_OTHER_DIMENSIONS.format(op=op, ndim=ndim, spatial=spatial,
                                               low=spatial + 1, high=spatial + 2),
                      stacklevel=user_stacklevel())
    if spatial == 2 and ndim == 3:
        warnings.warn(_THREE_D_TO_2D, stacklevel=user_stacklevel())
    leading = 2 if spatial == 2 or ndim == spatial + 2 else 1
    if ndim + (leading == 1) < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    return leading


def _channel_dropout(input: Tensor, p: float, training: bool, spatial: int, op: str) -> Tensor:
    _check_probability(p)
    input = as_tensor(input)
    leading = _channels(input, spatial, op)
    if not training or p == 0:
        return input
    if p == 1:
        return input * 0.0
    shape = tuple(input.shape[:leading]) + (1,) * (input.ndim - leading)
    return input * (_kept(shape, p, input.dtype) / (1 - p))


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
    """Zero whole channels of ``(N, C, H, W)`` input with probability ``p`` (other inputs as
    PyTorch: a 3-D one as ``(N, C, L)``, others with its warning).

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
