"""``pargraph.nn.functional``: layers and losses as functions, composed of pargraph ops."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pargraph import amp, ops
from pargraph._tensor import Tensor, apply
from pargraph.factories import arange, as_tensor, default_generator, drawn
from pargraph.factories import tensor as pargraph_tensor
from pargraph.functions import cat, einsum, pdist  # noqa: F401  (PyTorch's F holds pdist)
from pargraph.functions import where as pargraph_where
from pargraph.nn.activation import (  # noqa: F401  (PyTorch's F holds them)
    celu,
    celu_,
    elu,
    elu_,
    glu,
    gumbel_softmax,
    hardshrink,
    hardsigmoid,
    hardswish,
    hardtanh,
    hardtanh_,
    in_place,
    logsigmoid,
    mish,
    prelu,
    relu6,
    rrelu,
    rrelu_,
    selu,
    selu_,
    softmin,
    softshrink,
    softsign,
    tanhshrink,
    threshold,
    threshold_,
)
from pargraph.nn.distance import (  # noqa: F401
    cosine_similarity,
    normalize,
    pairwise_distance,
)
from pargraph.nn.normalization import (  # noqa: F401
    batch_norm,
    embedding,
    gelu,
    group_norm,
    instance_norm,
    layer_norm,
    local_response_norm,
    rms_norm,
)
from pargraph.nn.sparse import embedding_bag  # noqa: F401
from pargraph.nn.spatial import (  # noqa: F401  (PyTorch's F holds them)
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    adaptive_avg_pool3d,
    adaptive_max_pool1d,
    adaptive_max_pool1d_with_indices,
    adaptive_max_pool2d,
    adaptive_max_pool2d_with_indices,
    adaptive_max_pool3d,
    adaptive_max_pool3d_with_indices,
    affine_grid,
    avg_pool1d,
    avg_pool2d,
    avg_pool3d,
    conv1d,
    conv2d,
    conv3d,
    conv_transpose1d,
    conv_transpose2d,
    conv_transpose3d,
    fold,
    fractional_max_pool2d,
    fractional_max_pool2d_with_indices,
    fractional_max_pool3d,
    fractional_max_pool3d_with_indices,
    grid_sample,
    interpolate,
    lp_pool1d,
    lp_pool2d,
    lp_pool3d,
    max_pool1d,
    max_pool1d_with_indices,
    max_pool2d,
    max_pool2d_with_indices,
    max_pool3d,
    max_pool3d_with_indices,
    max_unpool1d,
    max_unpool2d,
    max_unpool3d,
    pad,
    pixel_shuffle,
    pixel_unshuffle,
    unfold,
    upsample,
    upsample_bilinear,
    upsample_nearest,
)

_REDUCTIONS = ("mean", "sum", "none")


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """max(x, 0); ``inplace``: ``input`` takes the result, as in PyTorch.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.relu(pargraph.tensor([-1.0, 2.0]))
    tensor([0., 2.])
    """
    return input.relu_() if inplace else input.relu()


def relu_(input: Tensor) -> Tensor:
    """:func:`relu` in place.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> x = pargraph.tensor([-1.0, 2.0])
    >>> _ = F.relu_(x)
    >>> x.tolist()
    [0.0, 2.0]
    """
    return input.relu_()


def sigmoid(input: Tensor) -> Tensor:
    """1 / (1 + exp(-x)).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.sigmoid(pargraph.zeros(1))
    tensor([0.5000])
    """
    return input.sigmoid()


def tanh(input: Tensor) -> Tensor:
    """The hyperbolic tangent.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.tanh(pargraph.zeros(1))
    tensor([0.])
    """
    return input.tanh()


def softmax(input: Tensor, dim: int) -> Tensor:
    """exp(x) normalized along ``dim`` (computed stably).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.softmax(pargraph.zeros(2), dim=0)
    tensor([0.5000, 0.5000])
    """
    return input.softmax(dim)


def log_softmax(input: Tensor, dim: int) -> Tensor:
    """log(softmax(x)) along ``dim``, computed stably.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> round(F.log_softmax(pargraph.zeros(2), dim=0)[0].item(), 4)
    -0.6931
    """
    return input.log_softmax(dim)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """``x`` where positive, else ``negative_slope * x``.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.leaky_relu(pargraph.tensor([-2.0, 3.0]), 0.1)
    tensor([-0.2000,  3.0000])
    """
    return in_place(input, pargraph_where(input > 0, input, input * negative_slope), inplace)


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """:func:`leaky_relu` in place."""
    return leaky_relu(input, negative_slope, inplace=True)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * sigmoid(x)`` (swish).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.silu(pargraph.zeros(1))
    tensor([0.])
    """
    return in_place(input, input * input.sigmoid(), inplace)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:  # noqa: F811
    """``log(1 + exp(beta * x)) / beta``, computed stably; linear above ``threshold``.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.softplus(pargraph.zeros(1))
    tensor([0.6931])
    """
    scaled = input * beta
    # log1p(exp(-|s|)) + max(s, 0): no overflow; maximum shares its gradient at the tie s = 0,
    # where abs gives none, so the gradient there is sigmoid(0) = 0.5, as it should be.
    smooth = ((-scaled.abs()).exp().log1p() + scaled.maximum(scaled.new_zeros(()))) / beta
    return pargraph_where(scaled > threshold, input, smooth)


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """Class indices as int64 rows of zeros with a one at the index.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.one_hot(pargraph.tensor([0, 2]), 3).tolist()
    [[1, 0, 0], [0, 0, 1]]
    """
    indices = as_tensor(tensor)
    if indices.dtype.kind not in "iu":
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if num_classes < 0:
        num_classes = int(indices.max().item()) + 1 if indices.numel() else 0
    checked = apply(ops.checked_index,
        indices, num_classes, "RuntimeError",
        ("Class values must be non-negative.", "Class values must be smaller than num_classes."),
        "one_hot")
    return (checked.unsqueeze(-1) == arange(num_classes)).long()


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


@amp.autocasts("lower")
def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """x @ weight.T + bias.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.linear(pargraph.ones(1, 2), pargraph.ones(3, 2), pargraph.zeros(3))
    tensor([[2., 2., 2.]])
    """
    return apply(ops.linear, input, weight, *(() if bias is None else (bias,)))


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor,
             bias: Tensor | None = None) -> Tensor:
    """y_o = x1 @ weight[o] @ x2 + bias_o over the last dimensions (any leading ones shared).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.bilinear(pargraph.ones(1, 2), pargraph.ones(1, 3), pargraph.ones(4, 2, 3)).tolist()
    [[6.0, 6.0, 6.0, 6.0]]
    """
    input1, input2, weight = as_tensor(input1), as_tensor(input2), as_tensor(weight)
    if weight.ndim != 3:
        raise RuntimeError(f"bilinear(): weight must be 3-D, got {weight.ndim}-D")
    if input1.shape[:-1] != input2.shape[:-1]:
        raise RuntimeError(f"bilinear(): input batch dimensions do not match: got "
                           f"{tuple(input1.shape[:-1])} and {tuple(input2.shape[:-1])}")
    if input1.shape[-1] != weight.shape[1] or input2.shape[-1] != weight.shape[2]:
        raise RuntimeError(f"bilinear(): input sizes ({input1.shape[-1]}, {input2.shape[-1]}) "
                           f"do not match the weight's ({weight.shape[1]}, {weight.shape[2]})")
    out = einsum("...i,oij,...j->...o", input1, weight, input2)
    return out if bias is None else out + bias


#: PyTorch's grad_fn names of the losses that are one op there (l1_loss is a mean there too).
_LOSS_NAMES = {"mse_loss": "MseLossBackward0", "smooth_l1_loss": "SmoothL1LossBackward0",
               "binary_cross_entropy": "BinaryCrossEntropyBackward0",
               "binary_cross_entropy_with_logits": "BinaryCrossEntropyWithLogitsBackward0"}


def _reduce(loss: Tensor, reduction: str, op: str) -> Tensor:
    _check_reduction(reduction, op)
    out = loss.mean() if reduction == "mean" else loss.sum() if reduction == "sum" else loss
    if op in _LOSS_NAMES and out._node.history:
        out._node.grad_name = _LOSS_NAMES[op]
    return out


def _check_reduction(reduction: str, op: str) -> None:
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{op}: reduction must be one of {_REDUCTIONS}, got {reduction!r}")


def _same_shape(input: Tensor, target: Tensor, op: str) -> None:
    if input.shape != target.shape:
        raise ValueError(f"{op}: target size {target.shape} must be the same as input size "
                         f"{input.shape}")


@amp.autocasts("fp32")
def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Mean squared error.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.mse_loss(pargraph.tensor([1.0, 3.0]), pargraph.tensor([1.0, 1.0]))
    tensor(2.)
    """
    target = as_tensor(target)
    _same_shape(input, target, "mse_loss")
    diff = input - target
    return _reduce(diff * diff, reduction, "mse_loss")


@amp.autocasts("fp32")
def l1_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Mean absolute error.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.l1_loss(pargraph.tensor([1.0, 3.0]), pargraph.tensor([1.0, 1.0]))
    tensor(1.)
    """
    target = as_tensor(target)
    _same_shape(input, target, "l1_loss")
    return _reduce((input - target).abs(), reduction, "l1_loss")


@amp.autocasts("fp32")
def smooth_l1_loss(input: Tensor, target: Tensor, reduction: str = "mean",
                   beta: float = 1.0) -> Tensor:
    """Huber-like loss: ``0.5 d**2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta``.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.smooth_l1_loss(pargraph.tensor([0.5, 3.0]), pargraph.tensor([0.0, 0.0]))
    tensor(1.3125)
    """
    if beta < 0:
        raise RuntimeError(f"smooth_l1_loss does not support negative values for beta "
                           f"(got {beta})")
    target = as_tensor(target)
    _same_shape(input, target, "smooth_l1_loss")
    diff = (input - target).abs()
    if beta == 0:
        return _reduce(diff, reduction, "smooth_l1_loss")
    loss = pargraph_where(diff < beta, diff * diff * (0.5 / beta), diff - 0.5 * beta)
    return _reduce(loss, reduction, "smooth_l1_loss")


@amp.autocasts("fp32")
def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                         size_average: bool | None = None, reduce: bool | None = None,
                         reduction: str = "mean") -> Tensor:
    """Binary cross-entropy of probabilities, each element's loss times ``weight`` (broadcast)
    if given; logs are clamped at -100, as in PyTorch.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> round(F.binary_cross_entropy(pargraph.tensor([0.5]), pargraph.tensor([1.0])).item(), 4)
    0.6931
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    target = as_tensor(target, dtype=input.dtype)
    _same_shape(input, target, "binary_cross_entropy")
    loss = apply(ops.binary_cross_entropy, input, target)
    if weight is not None:
        loss = loss * as_tensor(weight, dtype=input.dtype)
    return _reduce(loss, reduction, "binary_cross_entropy")


@amp.autocasts("fp32")
def binary_cross_entropy_with_logits(input: Tensor, target: Tensor,
                                     weight: Tensor | None = None,
                                     size_average: bool | None = None,
                                     reduce: bool | None = None, reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """Binary cross-entropy of logits, computed stably: (1 - y) x - log_sigmoid(x); with
    ``pos_weight`` (per class, broadcast over the last dimension) the positive term is
    weighted, and each element's loss is multiplied by ``weight`` if given, as in PyTorch.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> x = pargraph.tensor([0.0])
    >>> round(F.binary_cross_entropy_with_logits(x, pargraph.tensor([1.0])).item(), 4)
    0.6931
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    target = as_tensor(target, dtype=input.dtype)
    _same_shape(input, target, "binary_cross_entropy_with_logits")
    # PyTorch's formulas, in its order: each term rounds alike.
    # min and max split their gradient at 0 (a tie), which makes it sigmoid(x) - y there,
    # as PyTorch's (a clamp would pass all of it).
    if pos_weight is None:
        loss = (1 - target) * input - logsigmoid(input)
    else:
        log_weight = (as_tensor(pos_weight, dtype=input.dtype) - 1) * target + 1
        loss = (1 - target) * input + log_weight * (
            (-input.abs()).exp().log1p() + (-input).maximum(input.new_zeros(())))
    if weight is not None:
        loss = loss * as_tensor(weight, dtype=input.dtype)
    return _reduce(loss, reduction, "binary_cross_entropy_with_logits")


def _legacy_reduction(size_average: bool | None, reduce: bool | None, reduction: str) -> str:
    """PyTorch's deprecated ``size_average``/``reduce`` arguments as a ``reduction``."""
    if size_average is None and reduce is None:
        return reduction
    if reduce is False:
        return "none"
    return "sum" if size_average is False else "mean"


def _check_class_targets(input: Tensor, target: Tensor, weight: Tensor | None,
                         ignore_index: int, op: str) -> None:
    if input.ndim not in (1, 2):
        raise ValueError(f"{op}: expected input of shape (N, C) or (C,), got {input.shape}")
    if target.ndim > 1:
        raise RuntimeError(f"{op}: 0D or 1D target tensor expected, multi-target not "
                           f"supported (got a target of shape {list(target.shape)})")
    if target.dtype not in (np.dtype(np.int64), np.dtype(np.uint8)):
        raise RuntimeError(f"{op}: expected target dtype to be Long or Byte, but got "
                           f"{ops.torch_name(target.dtype)}")
    expected = input.shape[:-1]
    if target.shape != expected:
        raise ValueError(f"{op}: Expected input batch_size ({input.shape[0]}) to match target "
                         f"batch_size ({target.shape[0] if target.ndim else 1}).")
    classes = input.shape[-1]
    if weight is not None and weight.shape != (classes,):
        raise RuntimeError(f"{op}: weight tensor should be defined either for all {classes} "
                           f"classes or no classes but got weight tensor of shape "
                           f"{list(weight.shape)}")
    if target._node.value is not None and target.numel():
        # Targets are data, so usually known: check them here, at the user's line.
        values = np.asarray(target._node.value)
        if values.min() >= 0 and values.max() < classes:  # every step: the cheap test first
            return
        bad = values[((values < 0) | (values >= classes)) & (values != ignore_index)]
        if bad.size:
            raise IndexError(f"{op}: target {int(bad.flat[0])} is out of bounds for {classes} "
                             f"classes (expected class indices in [0, {classes - 1}] or "
                             f"ignore_index {ignore_index})")


@amp.autocasts("fp32")
def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
             size_average: bool | None = None, ignore_index: int = -100,
             reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of class indices, given log-probabilities: ``-input[i,
    target[i]]``, times ``weight[target[i]]``; targets equal to ``ignore_index`` count for
    nothing, and ``mean`` divides by the kept targets' total weight.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.nll_loss(pargraph.tensor([[-1.0, -2.0]]), pargraph.tensor([1]))
    tensor(2.)
    """
    target = as_tensor(target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, "nll_loss")
    weight = None if weight is None else as_tensor(weight, dtype=input.dtype)
    input, target, spatial = _classes_last(as_tensor(input), target, "nll_loss")
    _check_class_targets(input, target, weight, ignore_index, "nll_loss")
    loss = _nll(input, target, weight, ignore_index, reduction)
    return loss.reshape(spatial) if spatial is not None and reduction == "none" else loss


def _classes_last(input: Tensor, target: Tensor, op: str, soft: bool = False
                  ) -> tuple[Tensor, Tensor, tuple | None]:
    """A K-dimensional loss's ``(N, C, d1, ...)`` input as ``(N * d1 * ..., C)`` rows and its
    ``(N, d1, ...)`` class targets (or, ``soft``, class probabilities of the input's shape)
    flattened alike, and the shape an unreduced loss takes back (None for 1- and 2-D input)."""
    if input.ndim <= 2:
        return input, target, None
    classes, spatial = input.shape[1], (input.shape[0],) + tuple(input.shape[2:])
    if not soft and tuple(target.shape) != spatial:
        raise ValueError(f"{op}: expected target of shape {spatial} for input of shape "
                         f"{input.shape}, got {target.shape}")
    rows = input.movedim(1, -1).reshape(-1, classes)
    target = target.movedim(1, -1).reshape(-1, classes) if soft else target.reshape(-1)
    return rows, target, spatial


def _nll(input: Tensor, target: Tensor, weight: Tensor | None, ignore_index: int,
         reduction: str) -> Tensor:
    extra = () if weight is None else (weight,)
    return apply(ops.nll_loss, input, target, *extra, reduction=reduction,
                 ignore_index=int(ignore_index))


@amp.autocasts("fp32")
def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths: Any, target_lengths: Any,
             blank: int = 0, reduction: str = "mean", zero_infinity: bool = False) -> Tensor:
    """The connectionist temporal classification loss of ``log_probs`` (T, N, C), the
    log-softmax of a sequence model's outputs, for ``targets`` (N, S) padded or their
    concatenation (1-D), each element's first ``input_lengths`` steps and
    ``target_lengths`` labels, as ``torch.nn.functional.ctc_loss``: summed over every
    alignment; ``mean`` divides each by its target length before the batch mean;
    ``zero_infinity`` zeroes impossible alignments' losses and gradients.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> log_probs = pargraph.zeros(3, 1, 2).log_softmax(2)
    >>> round(F.ctc_loss(log_probs, pargraph.tensor([[1]]), (3,), (1,),
    ...                  reduction="sum").item(), 4)
    0.2877
    """
    _check_reduction(reduction, "ctc_loss")
    log_probs = as_tensor(log_probs)
    unbatched = log_probs.dim() == 2
    targets = as_tensor(targets)
    input_lengths, target_lengths = (as_tensor(v).long().reshape(-1)
                                     for v in (input_lengths, target_lengths))
    if unbatched:
        log_probs = log_probs.unsqueeze(1)
        targets = targets.reshape(1, -1)
    if log_probs.dim() != 3:
        raise RuntimeError(f"ctc_loss: expected log_probs of 2 or 3 dimensions (T, N, C), got "
                           f"{log_probs.dim()}")
    batch = log_probs.shape[1]
    for name, lengths in (("input_lengths", input_lengths), ("target_lengths", target_lengths)):
        if lengths.shape[0] != batch:
            raise RuntimeError(f"{name} must be of size batch_size")
    if not 0 <= blank < log_probs.shape[2]:
        raise RuntimeError("blank must be in label range")
    losses = apply(ops.ctc_loss, log_probs, targets.long(), input_lengths, target_lengths,
                   blank=blank, zero_infinity=bool(zero_infinity))
    if reduction == "mean":
        out = (losses / target_lengths.clamp(min=1).to(losses.dtype)).mean()
    else:
        out = losses.sum() if reduction == "sum" else losses
    return out.squeeze(0) if unbatched and reduction == "none" else out


@amp.autocasts("fp32")
def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                  size_average: bool | None = None, ignore_index: int = -100,
                  reduce: bool | None = None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """Cross-entropy of logits against class indices (``nll_loss(log_softmax(x))``, with
    ``weight``, ``ignore_index`` and ``label_smoothing`` as in PyTorch) or against class
    probabilities (a float target of the input's shape).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> round(F.cross_entropy(pargraph.zeros(1, 2), pargraph.tensor([0])).item(), 4)
    0.6931
    """
    target = as_tensor(target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, "cross_entropy")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be between 0.0 and 1.0, got "
                         f"{label_smoothing}")
    weight = None if weight is None else as_tensor(weight, dtype=input.dtype)
    input = as_tensor(input)
    soft = ops.is_floating(target.dtype) and target.shape == input.shape
    input, target, spatial = _classes_last(input, target, "cross_entropy", soft)
    if soft:
        loss = _soft_cross_entropy(input, target, weight, reduction, label_smoothing)
    else:
        _check_class_targets(input, target, weight, ignore_index, "cross_entropy")
        loss = _hard_cross_entropy(input, target, weight, ignore_index, reduction,
                                   label_smoothing)
    return loss.reshape(spatial) if spatial is not None and reduction == "none" else loss


def _hard_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None,
                        ignore_index: int, reduction: str, label_smoothing: float) -> Tensor:
    """Cross-entropy against class indices, rows of ``(N, C)`` logits."""
    log_probs = input.log_softmax(-1)
    loss = _nll(log_probs, target, weight, ignore_index, reduction)
    if not label_smoothing:
        return loss
    # PyTorch's formula: the smoothing term is the mean over classes of the weighted -log p,
    # zero for ignored targets, divided as the nll term is.
    kept = target != ignore_index
    smooth = -(log_probs if weight is None else log_probs * weight).sum(-1)
    smooth = pargraph_where(kept, smooth, 0.0)
    if reduction == "sum":
        smooth = smooth.sum()
    elif reduction == "mean":
        counted = kept.to(input.dtype) if weight is None else \
            pargraph_where(kept, weight[pargraph_where(kept, target, 0)], 0.0)
        smooth = smooth.sum() / counted.sum()
    classes = input.shape[-1]
    return (1 - label_smoothing) * loss + smooth * (label_smoothing / classes)


def _soft_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None, reduction: str,
                        label_smoothing: float) -> Tensor:
    """Cross-entropy against class probabilities: ``-sum_c weight_c target_c log p_c``;
    ``mean`` divides by the batch size."""
    classes = input.shape[-1]
    if label_smoothing:
        target = target * (1 - label_smoothing) + label_smoothing / classes
    terms = input.log_softmax(-1) * target
    return _reduce(-(terms if weight is None else terms * weight).sum(-1), reduction,
                   "cross_entropy")


def _masked_scores(scores: Tensor, mask: Tensor | None, allowed_when: bool) -> Tensor:
    """``scores`` with a bool mask applied (-inf where not allowed) or a float mask added."""
    if mask is None:
        return scores
    mask = as_tensor(mask)
    if mask.dtype == bool:
        return scores.masked_fill(mask if not allowed_when else ~mask, float("-inf"))
    return scores + mask


def multi_head_attention_forward(
        query: Tensor, key: Tensor, value: Tensor, embed_dim_to_check: int, num_heads: int,
        in_proj_weight: Tensor | None, in_proj_bias: Tensor | None, bias_k: Tensor | None,
        bias_v: Tensor | None, add_zero_attn: bool, dropout_p: float, out_proj_weight: Tensor,
        out_proj_bias: Tensor | None, training: bool = True,
        key_padding_mask: Tensor | None = None, need_weights: bool = True,
        attn_mask: Tensor | None = None, use_separate_proj_weight: bool = False,
        q_proj_weight: Tensor | None = None, k_proj_weight: Tensor | None = None,
        v_proj_weight: Tensor | None = None, static_k: Tensor | None = None,
        static_v: Tensor | None = None, average_attn_weights: bool = True,
        is_causal: bool = False, *, _batch_first: bool = False
        ) -> tuple[Tensor, Tensor | None]:
    """``MultiheadAttention``'s computation with its weights passed in: inputs ``(L, N, E)``
    (or unbatched ``(L, E)``), PyTorch's masks (bool True is not attended, float is added).
    Each head is its own branch of the graph (its slice of the projections, its scores,
    softmax and weighted sum), joined before the output projection. Returns the output and
    the attention weights (averaged over the heads unless ``average_attn_weights=False``).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> x, w = pargraph.randn(5, 2, 8), pargraph.randn(24, 8)
    >>> out, weights = F.multi_head_attention_forward(
    ...     x, x, x, 8, 2, w, None, None, None, False, 0.0, pargraph.randn(8, 8), None)
    >>> out.shape, weights.shape
    (pargraph.Size([5, 2, 8]), pargraph.Size([2, 5, 5]))
    """
    if static_k is not None or static_v is not None:
        raise NotImplementedError("multi_head_attention_forward: static_k and static_v are not "
                                  "supported")
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint")
    unbatched = query.ndim == 2
    q, k, v = (t.unsqueeze(0) if unbatched else t if _batch_first else t.transpose(0, 1)
               for t in (query, key, value))  # (N, L, E); MultiheadAttention's batch first
    e = q.shape[-1]
    if e != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but "
                             f"got {e}")
    if e % num_heads:
        raise AssertionError(f"embed_dim {e} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight:
        weights = [q_proj_weight, k_proj_weight, v_proj_weight]
    else:
        weights = [in_proj_weight[i * e:(i + 1) * e] for i in range(3)]
    projected = [linear(t, weight, None if in_proj_bias is None
                        else in_proj_bias[i * e:(i + 1) * e])
                 for i, (t, weight) in enumerate(zip((q, k, v), weights))]
    # Extra keys and values after the sequence, attended by every query: the learned
    # ``bias_k``/``bias_v``, then zeros (``add_zero_attn``); the masks let them through.
    extra = [(bias_k, bias_v)] if bias_k is not None else []
    if add_zero_attn:
        nothing = projected[1].new_zeros((1, 1, e))
        extra.append((nothing, nothing))
    for added_k, added_v in extra:
        batch = projected[1].shape[0]
        projected[1] = cat([projected[1], added_k.reshape(1, 1, e).expand(batch, 1, e)], 1)
        projected[2] = cat([projected[2], added_v.reshape(1, 1, e).expand(batch, 1, e)], 1)
        attn_mask, key_padding_mask = (None if m is None else _one_more_key(as_tensor(m))
                                       for m in (attn_mask, key_padding_mask))
    mask = _joint_mask(attn_mask, key_padding_mask, num_heads, q.shape[0], q.shape[1],
                       projected[1].shape[1])
    head_dim = e // num_heads
    heads, attentions = [], []
    for h in range(num_heads):
        part = slice(h * head_dim, (h + 1) * head_dim)
        qh, kh, vh = (t[..., part] for t in projected)
        scores = (qh @ kh.transpose(-2, -1)) * (1 / math.sqrt(head_dim))
        head_mask = mask[:, h] if mask is not None and mask.ndim == 4 else mask
        attention = _masked_scores(scores, head_mask, allowed_when=False).softmax(-1)
        attentions.append(attention)
        heads.append(dropout(attention, dropout_p, training) @ vh)
    out = linear(cat(heads, -1), out_proj_weight, out_proj_bias)
    out = out.squeeze(0) if unbatched else out if _batch_first else out.transpose(0, 1)
    if not need_weights:
        return out, None
    stacked = cat([a.unsqueeze(1) for a in attentions], 1)
    result = stacked.mean(1) if average_attn_weights else stacked
    return out, result.squeeze(0) if unbatched else result


def _joint_mask(attn_mask: Tensor | None, key_padding_mask: Tensor | None, heads: int,
                batch: int, target: int, source: int) -> Tensor | None:
    """One mask of shape (L, S), (N, L, S) or (N, H, L, S): True or -inf is not attended."""
    masks = []
    if attn_mask is not None:
        attn_mask = _bool_or_float(attn_mask, "attn_mask")
        if attn_mask.ndim == 3:
            attn_mask = attn_mask.reshape(batch, heads, target, source)
        elif tuple(attn_mask.shape) != (target, source):
            raise RuntimeError(f"The shape of the 2D attn_mask is {attn_mask.shape}, but "
                               f"should be {(target, source)}.")
        masks.append(attn_mask)
    if key_padding_mask is not None:
        padding = _bool_or_float(key_padding_mask, "key_padding_mask")
        if tuple(padding.shape[-1:]) != (source,):
            raise RuntimeError(f"key_padding_mask of shape {padding.shape} does not match "
                               f"{source} keys")
        masks.append(padding.reshape(batch, 1, source))
    if len(masks) < 2:
        return masks[0] if masks else None
    as_float = [m.float().masked_fill(m, float("-inf")) if m.dtype == bool else m
                for m in masks]
    return as_float[0] + (as_float[1].unsqueeze(1) if as_float[0].ndim == 4 else as_float[1])


def _bool_or_float(mask: Any, name: str) -> Tensor:
    """An attention mask as a tensor, refused as PyTorch's MultiheadAttention refuses it when
    it is neither bool nor floating (an integer mask would be added as a float one)."""
    mask = as_tensor(mask)
    if mask.dtype != bool and not ops.is_floating(mask.dtype):
        raise AssertionError(f"only bool and floating types of {name} are supported, got "
                             f"{ops.torch_name(mask.dtype)}")
    return mask


def _one_more_key(mask: Tensor) -> Tensor:
    """``mask`` with a last column that lets every query attend one more key."""
    return cat([mask, mask.new_zeros((*mask.shape[:-1], 1))], -1)


@amp.autocasts("lower")
def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor,
                                 attn_mask: Tensor | None = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> Tensor:
    """``softmax(query @ key.T * scale + mask) @ value`` over the last two dimensions
    (``attn_mask``: bool, True takes part; or float, added; ``is_causal``: a lower-triangular
    mask).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> q = k = v = pargraph.ones(2, 4, 3, 8)
    >>> F.scaled_dot_product_attention(q, k, v, is_causal=True).shape
    pargraph.Size([2, 4, 3, 8])
    """
    if is_causal and attn_mask is not None:
        raise RuntimeError("scaled_dot_product_attention: _scaled_dot_product_attention: "
                           "Explicit attn_mask should not be set when is_causal=True")
    query, key, value = as_tensor(query), as_tensor(key), as_tensor(value)
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise RuntimeError(f"scaled_dot_product_attention: query {list(query.shape)}, key "
                           f"{list(key.shape)} and value {list(value.shape)} do not fit "
                           f"(expected query and key to share the last dimension, key and "
                           f"value the sequence dimension)")
    if enable_gqa and query.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        # Grouped-query attention: each key/value head serves a group of query heads.
        heads, kv_heads = query.shape[-3], key.shape[-3]
        if heads % kv_heads or value.shape[-3] != kv_heads:
            raise RuntimeError(f"scaled_dot_product_attention: the number of heads in key "
                               f"and value ({kv_heads}, {value.shape[-3]}) must divide the "
                               f"number of heads in query ({heads})")
        key, value = (t.repeat_interleave(heads // kv_heads, -3) for t in (key, value))
    if attn_mask is not None:
        attn_mask = as_tensor(attn_mask)
        if attn_mask.dtype != bool and not ops.is_floating(attn_mask.dtype):
            raise RuntimeError("scaled_dot_product_attention: expected attn_mask dtype to be "
                               "bool or float or to match query dtype, but got "
                               f"{ops.torch_name(attn_mask.dtype)}")
    scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = (query @ key.transpose(-2, -1)) * scale
    if is_causal:
        causal = np.tril(np.ones((query.shape[-2], key.shape[-2]), dtype=bool))
        attn_mask = as_tensor(causal)
    if attn_mask is None:
        weights = scores.softmax(-1)
    else:
        # A query that may attend no key gets zeros, as PyTorch's kernels give (the softmax of
        # a row of -inf is NaN): its row is computed as zeros and its weights set to 0.
        masked = _masked_scores(scores, attn_mask, allowed_when=True)
        dead = (masked == float("-inf")).all(-1, keepdim=True)
        weights = pargraph_where(dead, 0.0, pargraph_where(dead, 0.0, masked).softmax(-1))
    return dropout(weights, dropout_p, training=dropout_p > 0) @ value


@amp.autocasts("fp32")
def kl_div(input: Tensor, target: Tensor, size_average: bool | None = None,
           reduce: bool | None = None, reduction: str = "mean",
           log_target: bool = False) -> Tensor:
    """Kullback-Leibler divergence of ``target`` from ``input`` (log-probabilities):
    ``target * (log(target) - input)``, 0 where ``target`` is 0; ``reduction="batchmean"``
    divides the sum by the batch size (what the divergence's definition asks for).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> p = pargraph.tensor([[0.5, 0.5]])
    >>> F.kl_div(p.log(), p, reduction="batchmean").item()
    0.0
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    target = as_tensor(target, dtype=input.dtype)
    if log_target:
        loss = target.exp() * (target - input)
    else:
        logged = pargraph_where(target > 0, target, target * 0.0 + 1.0).log()
        loss = pargraph_where(target > 0, target * (logged - input), target * 0.0)
    if reduction == "batchmean":
        return loss.sum() / (input.shape[0] if input.dim() else 1)
    return _reduce(loss, reduction, "kl_div")


@amp.autocasts("fp32")
def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean",
               delta: float = 1.0, weight: Tensor | None = None) -> Tensor:
    """``0.5 d²`` where ``|d| < delta``, else ``delta (|d| - 0.5 delta)``.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.huber_loss(pargraph.tensor([0.5, 3.0]), pargraph.zeros(2)).item()
    1.3125
    """
    target = as_tensor(target)
    _same_shape(input, target, "huber_loss")
    diff = (input - target).abs()
    loss = pargraph_where(diff < delta, diff * diff * 0.5, (diff - 0.5 * delta) * delta)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction, "huber_loss")


@amp.autocasts("fp32")
def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                        reduction: str = "mean") -> Tensor:
    """``max(0, -y (x1 - x2) + margin)``.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.margin_ranking_loss(pargraph.tensor([1.0]), pargraph.tensor([2.0]),
    ...                       pargraph.tensor([1.0])).item()
    1.0
    """
    loss = (-as_tensor(target) * (input1 - input2) + margin).clamp(min=0.0)
    return _reduce(loss, reduction, "margin_ranking_loss")


@amp.autocasts("fp32")
def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0,
                         reduction: str = "mean") -> Tensor:
    """``x`` where ``y == 1``, ``max(0, margin - x)`` where ``y == -1``.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.hinge_embedding_loss(pargraph.tensor([0.3, 0.3]),
    ...                        pargraph.tensor([1.0, -1.0])).tolist()
    0.5
    """
    target = as_tensor(target)
    zero = input * 0.0
    loss = pargraph_where(target == 1, input, zero) + \
        pargraph_where(target == -1, (margin - input).clamp(min=0.0), zero)
    return _reduce(loss, reduction, "hinge_embedding_loss")


@amp.autocasts("fp32")
def soft_margin_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """``log(1 + exp(-y x))``.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> round(F.soft_margin_loss(pargraph.zeros(1), pargraph.ones(1)).item(), 4)
    0.6931
    """
    loss = (-as_tensor(target) * input).exp().log1p()
    return _reduce(loss, reduction, "soft_margin_loss")


def multilabel_soft_margin_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                reduction: str = "mean") -> Tensor:
    """Binary cross-entropy with logits per class, averaged over the classes.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> round(F.multilabel_soft_margin_loss(pargraph.zeros(1, 2),
    ...                                     pargraph.ones(1, 2)).item(), 4)
    0.6931
    """
    target = as_tensor(target, dtype=input.dtype)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    loss = loss.mean(-1)
    return _reduce(loss, reduction, "multilabel_soft_margin_loss")


@amp.autocasts("fp32")
def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor,
                          margin: float = 0.0, reduction: str = "mean") -> Tensor:
    """``1 - cos(x1, x2)`` where ``y == 1``, ``max(0, cos(x1, x2) - margin)`` where
    ``y == -1``.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.cosine_embedding_loss(pargraph.ones(1, 2), pargraph.ones(1, 2),
    ...                         pargraph.tensor([1.0])).item()
    0.0
    """
    eps = 1e-12  # PyTorch's EPSILON for this loss
    dot = (input1 * input2).sum(-1)
    squares = ((input1 * input1).sum(-1) + eps) * ((input2 * input2).sum(-1) + eps)
    cosine = dot / squares.sqrt()
    target = as_tensor(target)
    zero = cosine * 0.0
    loss = pargraph_where(target == 1, 1 - cosine, zero) + \
        pargraph_where(target == -1, (cosine - margin).clamp(min=0.0), zero)
    return _reduce(loss, reduction, "cosine_embedding_loss")


@amp.autocasts("fp32")
def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor,
                        margin: float = 1.0, p: float = 2, eps: float = 1e-6,
                        swap: bool = False, reduction: str = "mean") -> Tensor:
    """``max(d(a, p) - d(a, n) + margin, 0)`` with ``d`` the pairwise ``p``-distance
    (``swap``: the smaller of ``d(a, n)`` and ``d(p, n)``).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> a = pargraph.zeros(1, 2)
    >>> round(F.triplet_margin_loss(a, a, pargraph.ones(1, 2) * 3).item(), 4)
    0.0
    """

    positive_distance = pairwise_distance(anchor, positive, p, eps)
    negative_distance = pairwise_distance(anchor, negative, p, eps)
    if swap:
        negative_distance = negative_distance.minimum(
            pairwise_distance(positive, negative, p, eps))
    loss = (positive_distance - negative_distance + margin).clamp(min=0.0)
    return _reduce(loss, reduction, "triplet_margin_loss")


def triplet_margin_with_distance_loss(anchor: Tensor, positive: Tensor, negative: Tensor, *,
                                      distance_function: Any = None, margin: float = 1.0,
                                      swap: bool = False, reduction: str = "mean") -> Tensor:
    """:func:`triplet_margin_loss` with any ``distance_function`` (default: the pairwise
    Euclidean distance).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> a = pargraph.zeros(1, 2)
    >>> F.triplet_margin_with_distance_loss(a, a, a + 3, margin=0.5).item()
    0.0
    """
    if margin <= 0:
        raise ValueError(f"triplet_margin_with_distance_loss: expected margin to be greater "
                         f"than 0, got {margin} instead")
    distance = distance_function if distance_function is not None else pairwise_distance
    positive_distance = distance(anchor, positive)
    negative_distance = distance(anchor, negative)
    if swap:
        negative_distance = negative_distance.minimum(distance(positive, negative))
    loss = (positive_distance - negative_distance + margin).clamp(min=0.0)
    return _reduce(loss, reduction, "triplet_margin_with_distance_loss")


@amp.autocasts("fp32")
def multi_margin_loss(input: Tensor, target: Tensor, p: int = 1, margin: float = 1.0,
                      weight: Tensor | None = None, size_average: bool | None = None,
                      reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """Multi-class hinge loss: ``sum_{i != y} max(0, margin - x[y] + x[i])^p / C`` per sample
    (times ``weight[y]``).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.multi_margin_loss(pargraph.tensor([[0.1, 0.2, 0.4, 0.8]]), pargraph.tensor([3])).item()
    0.32499998807907104
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    input, target = as_tensor(input), as_tensor(target)
    scores = input if input.ndim == 2 else input.reshape(1, -1)
    if target.dtype.kind not in "iu" or target.numel() != scores.shape[0]:
        raise RuntimeError(f"multi_margin_loss: expected {scores.shape[0]} int64 targets, got "
                           f"shape {tuple(target.shape)} of {target.dtype}")
    classes = scores.shape[1]
    rows = target.reshape(-1, 1)
    checked = apply(ops.checked_index, rows, classes, "IndexError", "target out of range",
                    "multi_margin_loss")
    chosen = scores.gather(1, checked)
    hinge = (scores - chosen + margin).clamp(min=0.0)
    if p == 2:
        hinge = hinge * hinge
    if weight is not None:
        hinge = hinge * as_tensor(weight, dtype=input.dtype)[checked.reshape(-1)].unsqueeze(1)
    others = (checked != arange(classes)).to(input.dtype)
    loss = (hinge * others).sum(1) / classes
    if input.ndim != 2:
        loss = loss.reshape(tuple(target.shape))
    return _reduce(loss, reduction, "multi_margin_loss")


@amp.autocasts("fp32")
def multilabel_margin_loss(input: Tensor, target: Tensor, size_average: bool | None = None,
                           reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """Multi-label hinge loss: each sample's targets are the class indices of ``target`` up to
    its first -1; ``sum_{j in targets, i not in targets} max(0, 1 - (x[j] - x[i])) / C``.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.multilabel_margin_loss(pargraph.tensor([[0.1, 0.2, 0.4, 0.8]]),
    ...                          pargraph.tensor([[3, 0, -1, 1]])).item()
    0.8500000238418579
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    input, target = as_tensor(input), as_tensor(target)
    if tuple(target.shape) != tuple(input.shape) or target.dtype.kind not in "iu":
        raise RuntimeError(f"multilabel_margin_loss: expected int64 targets of the input's "
                           f"shape {tuple(input.shape)}, got {tuple(target.shape)} of "
                           f"{target.dtype}")
    scores = input if input.ndim == 2 else input.reshape(1, -1)
    labels = target.numpy().reshape(scores.shape)  # which classes are targets decides the sum
    classes = scores.shape[1]
    pairs = np.zeros((scores.shape[0], classes, classes), dtype=input.dtype)  # [n, j, i]
    for n, row in enumerate(labels):
        ends = np.flatnonzero(row < 0)
        chosen = row[:ends[0] if len(ends) else classes]
        if chosen.size and (chosen.min() < 0 or chosen.max() >= classes):
            raise RuntimeError(f"multilabel_margin_loss: target {chosen.max()} is out of "
                               f"bounds for {classes} classes")
        others = np.setdiff1d(np.arange(classes), chosen)
        pairs[n, np.repeat(np.unique(chosen), len(others)),
              np.tile(others, len(np.unique(chosen)))] = 1
    margins = (1 - (scores.unsqueeze(2) - scores.unsqueeze(1))).clamp(min=0.0)
    loss = (margins * pargraph_tensor(pairs)).sum((1, 2)) / classes
    if input.ndim != 2:
        loss = loss.reshape(())
    return _reduce(loss, reduction, "multilabel_margin_loss")


@amp.autocasts("fp32")
def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool = True,
                     full: bool = False, size_average: bool | None = None,
                     eps: float = 1e-8, reduce: bool | None = None,
                     reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of ``target`` under a Poisson of rate ``exp(input)``
    (``log_input``) or ``input``; ``full`` adds Stirling's term.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.poisson_nll_loss(pargraph.zeros(1), pargraph.zeros(1)).item()
    1.0
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    target = as_tensor(target, dtype=input.dtype)
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * (input + eps).log()
    if full:
        stirling = target * target.log() - target + 0.5 * (2 * math.pi * target).log()
        loss = loss + pargraph_where(target > 1, stirling, stirling * 0.0)
    return _reduce(loss, reduction, "poisson_nll_loss")


def gaussian_nll_loss(input: Tensor, target: Tensor, var: Tensor | float, full: bool = False,
                      eps: float = 1e-6, reduction: str = "mean") -> Tensor:
    """``0.5 (log(max(var, eps)) + (input - target)² / max(var, eps))`` (``full``: plus
    ``0.5 log(2 pi)``).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.gaussian_nll_loss(pargraph.zeros(2), pargraph.zeros(2), pargraph.ones(2)).item()
    0.0
    """
    var = as_tensor(var, dtype=input.dtype)
    if var.dim() == input.dim() - 1 or (var.dim() == input.dim() and var.shape[-1] == 1
                                         and input.shape[-1] != 1):
        var = var.unsqueeze(-1) if var.dim() == input.dim() - 1 else var
    if bool((var < 0).any()):
        raise ValueError("var has negative entry/entries")
    var = var.clamp(min=eps)  # the clamp is not differentiated through, as in PyTorch
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction, "gaussian_nll_loss")


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """Interleave ``groups`` groups of channels of ``(N, C, ...)`` input (ShuffleNet): channel
    ``g * C/groups + k`` goes to ``k * groups + g``.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.channel_shuffle(pargraph.arange(4.0).reshape(1, 4, 1), 2).flatten().tolist()
    [0.0, 2.0, 1.0, 3.0]
    """
    if input.ndim < 3:
        raise RuntimeError(f"channel_shuffle expects input to have at least 3 dimensions, "
                           f"but got input with sizes {list(input.shape)}")
    shape = tuple(input.shape)
    if groups <= 0 or shape[1] % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got "
                           f"{shape[1]} channels and {groups} groups.")
    split = input.reshape(shape[:1] + (groups, shape[1] // groups) + shape[2:])
    return split.transpose(1, 2).reshape(shape)
