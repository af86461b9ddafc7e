"""``torch.nn.functional``'s losses: regression, classification, ranking, embedding and CTC."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pargraph import amp, ops
from pargraph._tensor import Tensor, apply
from pargraph.factories import arange, as_tensor
from pargraph.factories import tensor as pargraph_tensor
from pargraph.functions import where as pargraph_where
from pargraph.nn.functional.activation import logsigmoid
from pargraph.nn.functional.distance import pairwise_distance

_REDUCTIONS = ("mean", "sum", "none")


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
