"""Bags of embeddings: ``EmbeddingBag`` and ``F.embedding_bag`` (PyTorch's nn.modules.sparse).

A bag's rows are gathered into a padded (bags, longest bag, dim) block with a mask, so that the
three reductions are one gather and one masked reduction each, whatever the bags' lengths.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pargraph._tensor import Tensor
from pargraph.devices import check_device
from pargraph.factories import as_tensor, empty_for_init, tensor, zeros
from pargraph.functions import where
from pargraph.nn.module import Module, Parameter
from pargraph.nn.normalization import Embedding, embedding

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


class EmbeddingBag(Module):
    """A table of vectors whose bags of lookups are summed, averaged or maxed (PyTorch's
    parameter name and N(0, 1) initialization; the ``padding_idx`` row starts at zero).

    Examples
    --------
    >>> import pargraph
    >>> bag = pargraph.nn.EmbeddingBag(10, 3, mode="sum")
    >>> bag(pargraph.tensor([1, 2, 4, 5, 4]), pargraph.tensor([0, 2])).shape
    pargraph.Size([2, 3])
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, max_norm: float | None = None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean",
                 sparse: bool = False, _weight: Tensor | None = None,
                 include_last_offset: bool = False, padding_idx: int | None = None,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        check_device(device, "EmbeddingBag")
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise AssertionError("padding_idx must be within num_embeddings")
            padding_idx %= num_embeddings
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.mode, self.sparse = scale_grad_by_freq, mode, sparse
        self.include_last_offset, self.padding_idx = include_last_offset, padding_idx
        if _weight is None:
            self.weight = Parameter(empty_for_init(num_embeddings, embedding_dim))
            self.reset_parameters()
        else:
            self.weight = Parameter(_weight)
        if dtype is not None:
            self.to(dtype)

    @classmethod
    def from_pretrained(cls, embeddings: Tensor, freeze: bool = True,
                        max_norm: float | None = None, norm_type: float = 2.0,
                        scale_grad_by_freq: bool = False, mode: str = "mean",
                        sparse: bool = False, include_last_offset: bool = False,
                        padding_idx: int | None = None) -> EmbeddingBag:
        """An EmbeddingBag holding the 2-D ``embeddings`` (not trained when ``freeze``).

        Examples
        --------
        >>> import pargraph
        >>> bag = pargraph.nn.EmbeddingBag.from_pretrained(pargraph.eye(3), mode="max")
        >>> bag(pargraph.tensor([[0, 2]])).tolist()
        [[1.0, 0.0, 1.0]]
        """
        if embeddings.ndim != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        rows, dim = embeddings.shape
        made = cls(rows, dim, max_norm, norm_type, scale_grad_by_freq, mode, sparse, embeddings,
                   include_last_offset, padding_idx)
        made.weight.requires_grad = not freeze
        return made

    reset_parameters = Embedding.reset_parameters  # N(0, 1), the padding row zero

    def forward(self, input: Tensor, offsets: Tensor | None = None,
                per_sample_weights: Tensor | None = None) -> Tensor:
        return embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type,
                             self.scale_grad_by_freq, self.mode, self.sparse,
                             per_sample_weights, self.include_last_offset, self.padding_idx)

    def extra_repr(self) -> str:
        text = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.max_norm is not None:
            text += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            text += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq:
            text += ", scale_grad_by_freq=True"
        text += f", mode='{self.mode}'"
        if self.padding_idx is not None:
            text += f", padding_idx={self.padding_idx}"
        return text
