"""``torch.nn.functional``'s lookups: ``embedding``, ``embedding_bag`` and ``one_hot``."""

from __future__ import annotations

import numpy as np

from pargraph import ops
from pargraph._tensor import Tensor, apply
from pargraph.autograd.mode import no_grad
from pargraph.factories import (
    arange,
    as_tensor,
    tensor,
    zeros,
)
from pargraph.functions import where


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


def _renormalized(weight: Tensor, indices: Tensor, max_norm: float, norm_type: float) -> None:
    """Scale the rows of ``weight`` at ``indices`` whose norm exceeds ``max_norm`` by
    ``max_norm / (norm + 1e-7)`` (in float64, as PyTorch's), in place and untracked."""
    with no_grad():
        used = zeros(weight.shape[0], dtype=bool)
        used[indices.reshape(-1)] = True
        norms = weight.norm(p=norm_type, dim=1).double()
        scale = where(used & (norms > max_norm), max_norm / (norms + 1e-7), 1.0)
        weight.mul_(scale.to(weight.dtype).unsqueeze(1))


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None,
              max_norm: float | None = None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """The rows of ``weight`` at the integer ``input``; rows at ``padding_idx`` get no gradient.
    With ``max_norm``, the rows looked up whose ``norm_type``-norm exceeds it are first scaled
    down to it in ``weight`` itself, as PyTorch's ``embedding_renorm_``.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.embedding(pargraph.tensor([2, 0]), pargraph.eye(3)).tolist()
    [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
    """
    for name, value in (("scale_grad_by_freq", scale_grad_by_freq), ("sparse", sparse)):
        if value:
            raise NotImplementedError(f"embedding: {name}={value!r} is not supported")
    input, weight = as_tensor(input), as_tensor(weight)
    if input.dtype.kind not in "iu":
        raise RuntimeError(f"Expected tensor for argument #1 'indices' to have one of the "
                           f"following scalar types: Long, Int; but got {input.dtype} instead")
    if weight.ndim != 2:
        raise RuntimeError(f"'weight' must be 2-D, got {weight.ndim}-D")
    checked = ops.checked_index(input._node, weight.shape[0], "IndexError",
                                "index out of range in self", "embedding")
    if max_norm is not None:
        _renormalized(weight, Tensor(checked), float(max_norm), float(norm_type))
    out = weight[Tensor(checked)]
    if padding_idx is not None:
        padding_idx = ops.normalize_dim(padding_idx, weight.shape[0])
        out = where((input != padding_idx).unsqueeze(-1), out, out.detach())
    return apply(ops.shown_as, out, "EmbeddingBackward0")


MODES = ("sum", "mean", "max")


def _bags(input: Tensor, offsets: Tensor | None,
          include_last_offset: bool) -> tuple[Tensor, list[int], list[int]]:
    """The flat indices and each bag's start and end in them (PyTorch's checks and words)."""
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated "
                             "is a mini-batch of fixed length sequences. However, found offsets "
                             f"of type {type(offsets).__name__}")
        bags, length = input.shape
        starts = [b * length for b in range(bags)]
        return input.reshape(-1), starts, [s + length for s in starts]
    if input.ndim != 1:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension "
                         f"{input.ndim}")
    if offsets is None:
        raise ValueError("offsets has to be a 1D Tensor but got None")
    offsets = as_tensor(offsets)
    if offsets.ndim != 1:
        raise ValueError("offsets has to be a 1D Tensor")
    places = [int(v) for v in offsets.tolist()]  # the bags' bounds decide the graph's shape
    if places and places[0] != 0:
        raise RuntimeError(f"offsets[0] has to be 0, i.e., the first sequence in the mini-batch "
                           f"has to start from position 0. However, got {places[0]}")
    if places and places[-1] > input.shape[0]:
        raise RuntimeError(f"offsets[-1] can not be greater than input's length "
                           f"{input.shape[0]}, but got offsets[-1] of {places[-1]}")
    ends = places[1:] + ([] if include_last_offset else [input.shape[0]])
    return input, places[:len(ends)], ends


def embedding_bag(input: Tensor, weight: Tensor, offsets: Tensor | None = None,
                  max_norm: float | None = None, norm_type: float = 2,
                  scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights: Tensor | None = None, include_last_offset: bool = False,
                  padding_idx: int | None = None) -> Tensor:
    """The sum, mean or max of each bag of embeddings: the rows of a 2-D ``input`` are bags
    of equal length, a 1-D ``input`` is cut into bags at ``offsets``. Entries equal to
    ``padding_idx`` take no part; an empty bag gives zeros.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> table = pargraph.arange(6.0).reshape(3, 2)
    >>> F.embedding_bag(pargraph.tensor([0, 2, 1]), table, pargraph.tensor([0, 2]),
    ...                 mode="sum").tolist()
    [[4.0, 6.0], [2.0, 3.0]]
    """
    if mode not in MODES:
        raise ValueError("mode has to be one of sum, mean or max")
    input, weight = as_tensor(input), as_tensor(weight)
    if per_sample_weights is not None:
        if mode != "sum":
            raise NotImplementedError(
                f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                f"supported for mode='sum' (got mode='{mode}'). Please open a feature request "
                f"on GitHub.")
        per_sample_weights = as_tensor(per_sample_weights)
        if tuple(per_sample_weights.shape) != tuple(input.shape):
            raise ValueError(f"embedding_bag: If per_sample_weights ({per_sample_weights.shape})"
                             f" is not None, then it must have the same shape as the input "
                             f"({input.shape})")
        per_sample_weights = per_sample_weights.reshape(-1)
    flat, starts, ends = _bags(input, offsets, include_last_offset)
    rows = embedding(flat, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse)
    longest = max([e - s for s, e in zip(starts, ends)], default=0)
    if not starts or longest == 0:
        return zeros(len(starts), weight.shape[1], dtype=weight.dtype)
    # Per bag, its positions in ``flat`` (a short bag repeats its start) and which are real.
    at = np.array([[min(s + k, max(e - 1, 0)) for k in range(longest)]
                   for s, e in zip(starts, ends)], dtype=np.int64)
    real = np.array([[s + k < e for k in range(longest)] for s, e in zip(starts, ends)])
    if padding_idx is not None:
        padding_idx = padding_idx % weight.shape[0]
        real &= flat.numpy()[at] != padding_idx
    block = rows[tensor(at)]  # (bags, longest, dim)
    mask = tensor(real[..., None])
    if mode == "max":
        found = where(mask, block, float("-inf")).max(1).values
        return where(tensor(real.any(1)[:, None]), found, 0.0)
    if per_sample_weights is not None:
        block = block * per_sample_weights[tensor(at)].unsqueeze(-1)
    total = where(mask, block, 0.0).sum(1)
    if mode == "sum":
        return total
    counts = np.maximum(real.sum(1, keepdims=True), 1).astype(weight.dtype)
    return total / tensor(counts)
