"""Tensor methods whose result's shape depends on the values (``nonzero``, ``unique``, splits by
indices...): computed now, as PyTorch synchronizes for them."""

from __future__ import annotations

from typing import Any

import numpy as np

from pargraph import ops


class ValueMethods:
    """Tensor's results shaped by the values: a mixin of ``Tensor`` (``pargraph.methods`` says
    what the class it joins has)."""

    def masked_fill(self, mask: Any, value: Any) -> Any:
        """``value`` where ``mask`` (broadcast to this shape) is true, else this tensor.

        Examples
        --------
        >>> import pargraph
        >>> x = pargraph.zeros(3); x.masked_fill(pargraph.tensor([True, False, True]), 5.0)
        tensor([5., 0., 5.])
        """
        if not hasattr(mask, "_node"):
            mask = self._wrap(self._operand(mask))
        if mask.dtype.kind != "b":
            raise RuntimeError(f"masked_fill only supports boolean masks, but got mask with "
                               f"dtype {mask.dtype}")
        try:
            fits = np.broadcast_shapes(mask.shape, self.shape) == tuple(self.shape)
        except ValueError:
            fits = False
        if not fits:
            raise RuntimeError(f"masked_fill: the mask of shape {tuple(mask.shape)} is not "
                               f"broadcastable to the tensor's shape {tuple(self.shape)}")
        return self._apply(ops.where, mask._node, self._operand(value), self._node)

    def nonzero(self, *, as_tuple: bool = False) -> Any:
        """The indices of the nonzero elements: a (count, dims) tensor, or one tensor per
        dimension with ``as_tuple``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[0, 3], [4, 0]]).nonzero().tolist()
        [[0, 1], [1, 0]]
        """
        found = np.nonzero(np.atleast_1d(self._value()))
        if as_tuple:  # a 0-d tensor counts as one dimension here, as in PyTorch
            return tuple(self._constant(axis.astype(np.int64)) for axis in found)
        return self._constant(np.stack(found, -1).astype(np.int64)[:, :self.ndim])

    def unique(self, sorted: bool = True, return_inverse: bool = False,
               return_counts: bool = False, dim: int | None = None) -> Any:
        """The distinct elements, sorted (and where each element went, and how many of each).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([3, 1, 3, 2]).unique().tolist()
        [1, 2, 3]
        """
        # Each NaN is its own value, as in PyTorch (numpy would gather them into one).
        values, inverse, counts = np.unique(self._value(), return_inverse=True,
                                            return_counts=True, axis=dim, equal_nan=False)
        out = [self._constant(values)]
        if return_inverse:
            shape = tuple(self.shape) if dim is None else (self.shape[dim],)
            out.append(self._constant(inverse.reshape(shape).astype(np.int64)))
        if return_counts:
            out.append(self._constant(counts.astype(np.int64)))
        return out[0] if len(out) == 1 else tuple(out)

    def nanmedian(self, dim: int | None = None, keepdim: bool = False) -> Any:
        """The lower median of the elements that are not NaN (NaN where all are), of all
        elements or along ``dim`` with its index, as PyTorch.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([4.0, float("nan"), 1.0, 3.0]).nanmedian().item()
        3.0
        """
        from pargraph.selection import SortResult

        if self.dtype == bool:
            raise NotImplementedError('"nanmedian_cpu" not implemented for \'Bool\'')
        flat = dim is None
        x = self.reshape(-1) if flat else self
        d = 0 if flat else ops.normalize_dim(dim, max(self.dim(), 1))
        if x.ndim == 0:
            return x.clone() if flat else SortResult(x.clone(), self._constant(0, np.int64))
        ordered = x.sort(d)  # NaN sorts last
        count = (~x.isnan()).sum(d, keepdim=True)
        # All NaN: the middle one, as PyTorch picks it
        k = ((count - 1) // 2).where(count > 0, count.new_full((), (x.shape[d] - 1) // 2))
        values = ordered.values.gather(d, k)
        indices = ordered.indices.gather(d, k)
        if flat:
            return values.reshape(())
        if not keepdim:
            values, indices = values.squeeze(d), indices.squeeze(d)
        return SortResult(values, indices)

    def msort(self) -> Any:
        """The values sorted along the first dimension.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[2, 1], [0, 3]]).msort().tolist()
        [[0, 1], [2, 3]]
        """
        return self.sort(0).values

    def diagflat(self, offset: int = 0) -> Any:
        """A square matrix with the flattened elements on its ``offset`` diagonal.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[1, 2]]).diagflat().tolist()
        [[1, 0], [0, 2]]
        """
        return self.reshape(-1).diag(offset)

    def is_nonzero(self) -> bool:
        """Whether the single element is not zero.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([0.5]).is_nonzero()
        True
        """
        if self.numel() == 0:
            raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
        if self.numel() > 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self.reshape(()).item() != 0)

    def sgn(self) -> Any:
        """The sign of each element (``sign``: the tensors are real).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([-2.0, 0.0, 3.0]).sgn().tolist()
        [-1.0, 0.0, 1.0]
        """
        return self.sign()

    def tensor_split(self, indices_or_sections: Any, dim: int = 0) -> Any:
        """Views along ``dim``: ``n`` parts as equal as can be (the first ones one longer),
        or the parts between the given indices.

        Examples
        --------
        >>> import pargraph
        >>> [t.tolist() for t in pargraph.arange(5).tensor_split(2)]
        [[0, 1, 2], [3, 4]]
        """
        d = ops.normalize_dim(dim, max(self.dim(), 1))
        size = self.shape[d]
        if hasattr(indices_or_sections, "_node"):
            if indices_or_sections.ndim > 1 or indices_or_sections.dtype.kind not in "iu":
                raise RuntimeError("tensor_split expected tensor_indices_or_sections to be a "
                                   "zero-dimensional or one-dimensional tensor, but got a "
                                   f"tensor with {indices_or_sections.ndim} dims")
            indices_or_sections = indices_or_sections.tolist()
        if isinstance(indices_or_sections, int):
            sections = indices_or_sections
            if sections <= 0:
                raise RuntimeError(f"number of sections must be larger than 0, got {sections}")
            lengths = [size // sections + (k < size % sections) for k in range(sections)]
            bounds = list(np.cumsum([0] + lengths))
        else:
            bounds = [0, *indices_or_sections, size]
        pieces = []
        for start, stop in zip(bounds[:-1], bounds[1:]):
            start, stop = min(max(start, 0), size), min(max(stop, 0), size)
            pieces.append(self.narrow(d, start, max(stop - start, 0)))
        return tuple(pieces)

    def _split_at(self, sections: Any, dim: int, name: str, least: int) -> Any:
        if self.dim() < least:
            raise RuntimeError(f"torch.{name} requires a tensor with at least {least} "
                               f"dimension{'s' if least > 1 else ''}, but got a tensor with "
                               f"{self.dim()} dimension{'s' if self.dim() != 1 else ''}!")
        if isinstance(sections, int) and (sections == 0 or self.shape[dim] % sections):
            raise RuntimeError(f"torch.{name} attempted to split along dimension {dim}, but "
                               f"the size of the dimension {self.shape[dim]} is not divisible "
                               f"by the split_size {sections}!")
        return self.tensor_split(sections, dim)

    def hsplit(self, sections: Any) -> Any:
        """``tensor_split`` along the columns (dimension 1, or 0 for a vector); an int must
        divide it.

        Examples
        --------
        >>> import pargraph
        >>> [t.shape[1] for t in pargraph.ones(2, 4).hsplit(2)]
        [2, 2]
        """
        return self._split_at(sections, 1 if self.dim() > 1 else 0, "hsplit", 1)

    def vsplit(self, sections: Any) -> Any:
        """``tensor_split`` along the rows (dimension 0) of a tensor of 2 or more dimensions.

        Examples
        --------
        >>> import pargraph
        >>> [t.shape[0] for t in pargraph.ones(4, 2).vsplit([1])]
        [1, 3]
        """
        return self._split_at(sections, 0, "vsplit", 2)

    def dsplit(self, sections: Any) -> Any:
        """``tensor_split`` along the depth (dimension 2) of a tensor of 3 or more dimensions.

        Examples
        --------
        >>> import pargraph
        >>> [t.shape[2] for t in pargraph.ones(1, 1, 4).dsplit(4)]
        [1, 1, 1, 1]
        """
        return self._split_at(sections, 2, "dsplit", 3)

    def unique_consecutive(self, return_inverse: bool = False, return_counts: bool = False,
                           dim: int | None = None) -> Any:
        """The elements with each run of equal consecutive ones made one (and where each
        element went, and each run's length).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1, 1, 2, 2, 3, 1, 1]).unique_consecutive().tolist()
        [1, 2, 3, 1]
        """
        values = self._value()
        if dim is None:
            flat = values.reshape(-1)
            starts = np.ones(flat.shape[0], bool)
            starts[1:] = flat[1:] != flat[:-1]
            out = [self._constant(flat[starts])]
            shape = tuple(self.shape)
        else:
            d = ops.normalize_dim(dim, max(self.dim(), 1))
            moved = np.moveaxis(values, d, 0).reshape(values.shape[d], -1)
            starts = np.ones(moved.shape[0], bool)
            starts[1:] = (moved[1:] != moved[:-1]).any(1)
            out = [self._constant(np.take(values, np.flatnonzero(starts), axis=d))]
            shape = (self.shape[d],)
        if return_inverse:
            out.append(self._constant((np.cumsum(starts) - 1).reshape(shape).astype(np.int64)))
        if return_counts:
            edges = np.append(np.flatnonzero(starts), starts.shape[0])
            out.append(self._constant(np.diff(edges).astype(np.int64)))
        return out[0] if len(out) == 1 else tuple(out)

    def median(self, dim: int | None = None, keepdim: bool = False) -> Any:
        """The lower median (of all elements, or along ``dim`` with its index, as PyTorch).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([4.0, 1.0, 3.0, 2.0]).median().item()
        2.0
        """
        from pargraph.selection import SortResult

        if self.dtype == bool:
            raise NotImplementedError('"median_cpu" not implemented for \'Bool\'')
        if dim is None:
            flat = self.reshape(-1)
            return flat.sort(0).values[(flat.shape[0] - 1) // 2]
        d = ops.normalize_dim(dim, max(self.dim(), 1))
        ordered = self.sort(d)
        k = (self.shape[d] - 1) // 2
        pick = (slice(None),) * d + (slice(k, k + 1) if keepdim else k,)
        return SortResult(ordered.values[pick], ordered.indices[pick])

    def multinomial(self, num_samples: int, replacement: bool = False,
                    generator: Any = None) -> Any:
        """``num_samples`` category indices drawn per row with these (unnormalized) weights.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([0.0, 1.0, 0.0]).multinomial(2, replacement=True).tolist()
        [1, 1]
        """
        source = ops.defaults.generator if generator is None else generator.numpy_generator
        if replacement and self.dim():
            # lazily: the draws are a node of the graph, so sampling realizes nothing (a
            # policy's step runs once, at its .item())
            shape = tuple(self.shape[:-1]) + (int(num_samples),)
            uniforms = self._drawn(lambda: source.random(shape))
            if isinstance(self._node.value, np.ndarray):  # here now: refused at this line
                ops.checked_weights(np.asarray(self._node.value, np.float64).reshape(
                    -1, self.shape[-1]))
            return self._apply(ops.multinomial_draws, self.detach()._node, uniforms._node)
        weights = np.asarray(self._value(), dtype=np.float64)
        rows = weights.reshape(-1, weights.shape[-1])
        if (rows < 0).any() or not np.isfinite(rows).all():
            raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
        if not replacement and num_samples > rows.shape[-1]:
            raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without "
                               "replacement")
        if not replacement and ((rows > 0).sum(-1) < num_samples).any():
            raise RuntimeError("invalid multinomial distribution (with replacement=False, not "
                               "enough non-negative category to sample)")
        drawn = [source.choice(rows.shape[-1], num_samples, replace=replacement,
                               p=row / row.sum()) for row in rows]
        shape = weights.shape[:-1] + (num_samples,)
        return self._constant(np.asarray(drawn, dtype=np.int64).reshape(shape))
