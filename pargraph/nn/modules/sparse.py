"""Lookup layers: ``Embedding`` and ``EmbeddingBag``."""

from __future__ import annotations

from typing import Any

from pargraph._tensor import Tensor
from pargraph.autograd.mode import no_grad
from pargraph.devices import check_device
from pargraph.factories import empty_for_init
from pargraph.nn import init
from pargraph.nn.functional.embedding import embedding, embedding_bag
from pargraph.nn.module import Module, Parameter


class Embedding(Module):
    """A table of ``num_embeddings`` vectors looked up by integer index (initialized N(0, 1);
    the ``padding_idx`` row starts at zero and gets no gradient).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Embedding(10, 3)(pargraph.tensor([[1, 2], [4, 9]])).shape
    pargraph.Size([2, 2, 3])
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 max_norm: float | None = None, norm_type: float = 2.0,
                 scale_grad_by_freq: bool = False, sparse: bool = False,
                 _weight: Tensor | None = None, _freeze: bool = False, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        check_device(device, "Embedding")
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise AssertionError("Padding_idx must be within num_embeddings")
            padding_idx %= num_embeddings
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx, self.max_norm, self.sparse = padding_idx, max_norm, sparse
        self.norm_type, self.scale_grad_by_freq = norm_type, scale_grad_by_freq
        if _weight is None:
            self.weight = Parameter(empty_for_init(num_embeddings, embedding_dim))
            self.reset_parameters()
        else:
            self.weight = Parameter(_weight, requires_grad=not _freeze)
        if dtype is not None:
            self.to(dtype)

    @classmethod
    def from_pretrained(cls, embeddings: Tensor, freeze: bool = True,
                        padding_idx: int | None = None, max_norm: float | None = None,
                        norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                        sparse: bool = False) -> Embedding:
        """An Embedding holding the 2-D ``embeddings`` (not trained when ``freeze``).

        Examples
        --------
        >>> import pargraph
        >>> table = pargraph.nn.Embedding.from_pretrained(pargraph.eye(3))
        >>> table(pargraph.tensor([2])).tolist(), table.weight.requires_grad
        ([[0.0, 0.0, 1.0]], False)
        """
        if embeddings.ndim != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        rows, dim = embeddings.shape
        return cls(rows, dim, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse,
                   _weight=embeddings, _freeze=freeze)

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx] = 0.0

    def forward(self, input: Tensor) -> Tensor:
        return embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                         scale_grad_by_freq=self.scale_grad_by_freq, sparse=self.sparse)

    def extra_repr(self) -> str:
        text = f"{self.num_embeddings}, {self.embedding_dim}"
        return text + (f", padding_idx={self.padding_idx}" if self.padding_idx is not None
                       else "")


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
