"""Tensor methods in place (``add_``, ``clamp_``, ``sigmoid_``...): each the out-of-place method's
result put in the tensor's place."""

from __future__ import annotations

from typing import Any

import numpy as np

from pargraph import ops
from pargraph.graph import toposort


class InPlaceMethods:
    """Tensor's in-place forms: a mixin of ``Tensor`` (``pargraph.methods`` says what the class it
    joins has)."""

    def _in_place(self, result: Any) -> Any:
        """This tensor made ``result``, which the in-place op computed from it: the nodes
        that computation recorded after this tensor's value (a composite's several) are the
        op's own, whose use of the old value PyTorch allows."""
        self._check_in_place()
        old, new = self._node, result._node
        own = [n.uid for n in toposort([new], stop=lambda n: n.uid <= old.uid)
               if n.uid > old.uid]
        return self._rebind(new, min(own, default=new.uid))

    def lerp_(self, end: Any, weight: Any) -> Any:
        """``lerp`` in place (what an exponential moving average writes).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(1).lerp_(pargraph.ones(1) * 4, 0.25).tolist()
        [1.0]
        """
        return self._in_place(self.lerp(end, weight).to(self.dtype))

    def addcmul_(self, tensor1: Any, tensor2: Any, *, value: float = 1) -> Any:
        """``addcmul`` in place (what optimizers write).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(1).addcmul_(pargraph.ones(1), pargraph.ones(1), value=2).tolist()
        [3.0]
        """
        return self._in_place(self.addcmul(tensor1, tensor2, value=value))

    def addcdiv_(self, tensor1: Any, tensor2: Any, *, value: float = 1) -> Any:
        """``addcdiv`` in place (what optimizers write).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(1).addcdiv_(pargraph.ones(1), pargraph.ones(1) * 2).tolist()
        [1.5]
        """
        return self._in_place(self.addcdiv(tensor1, tensor2, value=value))

    def exp_(self) -> Any:
        """``exp`` in place.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(1).exp_().tolist()
        [1.0]
        """
        return self._in_place(self.exp())

    def relu_(self) -> Any:
        """``relu`` in place.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([-1.0, 2.0]).relu_().tolist()
        [0.0, 2.0]
        """
        return self._in_place(self.relu())

    def t_(self) -> Any:
        """``t`` in place (the tensor takes the transposed shape, as in PyTorch).

        Examples
        --------
        >>> import pargraph
        >>> tuple(pargraph.ones(2, 3).t_().shape)
        (3, 2)
        """
        self._check_in_place()
        self._replace(self.t()._node)
        return self

    def squeeze_(self, dim: Any = None) -> Any:
        """``squeeze`` in place.

        Examples
        --------
        >>> import pargraph
        >>> tuple(pargraph.ones(1, 2).squeeze_().shape)
        (2,)
        """
        self._check_in_place()
        self._replace((self.squeeze() if dim is None else self.squeeze(dim))._node)
        return self

    def unsqueeze_(self, dim: int) -> Any:
        """``unsqueeze`` in place.

        Examples
        --------
        >>> import pargraph
        >>> tuple(pargraph.ones(2).unsqueeze_(0).shape)
        (1, 2)
        """
        self._check_in_place()
        self._replace(self.unsqueeze(dim)._node)
        return self

    def masked_fill_(self, mask: Any, value: Any) -> Any:
        """``masked_fill`` in place.

        Examples
        --------
        >>> import pargraph
        >>> x = pargraph.zeros(2); x.masked_fill_(pargraph.tensor([True, False]), 5.0).tolist()
        [5.0, 0.0]
        """
        return self._in_place(self.masked_fill(mask, value))

    def index_fill_(self, dim: int, index: Any, value: Any) -> Any:
        """Set the slices at ``index`` along ``dim`` to ``value``, in place.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(3).index_fill_(0, pargraph.tensor([0, 2]), 1.0).tolist()
        [1.0, 0.0, 1.0]
        """
        d = ops.normalize_dim(dim, max(self.dim(), 1))
        self[(slice(None),) * d + (index,)] = value
        return self

    def index_add(self, dim: int, index: Any, source: Any, *, alpha: float = 1) -> Any:
        """A copy with ``alpha * source``'s slices added at ``index`` along ``dim``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(3).index_add(0, pargraph.tensor([2, 2]), pargraph.ones(2)).tolist()
        [0.0, 0.0, 2.0]
        """
        d = ops.normalize_dim(dim, max(self.dim(), 1))
        source = source if hasattr(source, "_node") else self._constant(source, self.dtype)
        source = source.to(self.dtype) * alpha if alpha != 1 else source.to(self.dtype)
        index = index if hasattr(index, "_node") else self._constant(index)
        spec = (slice(None),) * d + (ops.IndexSlot(0),)
        added = ops.index_add(source._node, index._node, shape=tuple(self.shape), spec=spec)
        return self + self._wrap(added)

    def index_copy(self, dim: int, index: Any, source: Any) -> Any:
        """A copy with ``source``'s slices written at ``index`` along ``dim``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(3).index_copy(0, pargraph.tensor([2, 0]), pargraph.ones(2)).tolist()
        [1.0, 0.0, 1.0]
        """
        out = self.clone()
        return out.index_copy_(dim, index, source)

    def index_copy_(self, dim: int, index: Any, source: Any) -> Any:
        """``index_copy`` in place.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(2).index_copy_(0, pargraph.tensor([1]), pargraph.ones(1)).tolist()
        [0.0, 1.0]
        """
        d = ops.normalize_dim(dim, max(self.dim(), 1))
        self[(slice(None),) * d + (index,)] = source
        return self

    def index_fill(self, dim: int, index: Any, value: Any) -> Any:
        """A copy with ``value`` at ``index`` along ``dim``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(3).index_fill(0, pargraph.tensor([1]), 2.0).tolist()
        [0.0, 2.0, 0.0]
        """
        return self.clone().index_fill_(dim, index, value)

    def masked_scatter(self, mask: Any, source: Any) -> Any:
        """A copy with ``source``'s first elements, in order, where ``mask`` is True.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(4).masked_scatter(pargraph.tensor([True, False, True, False]),
        ...                                  pargraph.tensor([5.0, 6.0, 7.0])).tolist()
        [5.0, 0.0, 6.0, 0.0]
        """
        return self.clone().masked_scatter_(mask, source)

    def masked_scatter_(self, mask: Any, source: Any) -> Any:
        """``masked_scatter`` in place.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(2).masked_scatter_(pargraph.tensor([False, True]),
        ...                                   pargraph.ones(1)).tolist()
        [0.0, 1.0]
        """
        mask = mask if hasattr(mask, "_node") else self._constant(mask)
        if mask.dtype != np.bool_:
            raise RuntimeError(f"masked_scatter_ only supports boolean masks, but got mask with "
                               f"dtype {ops.torch_name(mask.dtype)}")
        mask = mask.expand_as(self)
        count = int(mask.sum().item())
        if count > source.numel():
            raise RuntimeError("masked_scatter: expected source to have at least as many "
                               f"elements as ones in mask ({count}), got {source.numel()}")
        self[mask] = source.reshape(-1)[:count]
        return self

    def index_add_(self, dim: int, index: Any, source: Any, *, alpha: float = 1) -> Any:
        """Add ``alpha * source``'s slices at ``index`` along ``dim`` (repeats accumulate),
        in place.

        Examples
        --------
        >>> import pargraph
        >>> x = pargraph.zeros(3)
        >>> x.index_add_(0, pargraph.tensor([0, 0]), pargraph.tensor([1.0, 2.0])).tolist()
        [3.0, 0.0, 0.0]
        """
        return self._in_place(self.index_add(dim, index, source, alpha=alpha))

    def uniform_(self, a: float = 0.0, b: float = 1.0, generator: Any = None) -> Any:
        """Fill with samples of U(a, b).

        Examples
        --------
        >>> import pargraph
        >>> bool((pargraph.zeros(10).uniform_(2.0, 3.0) >= 2.0).all())
        True
        """
        return self._fill_drawn(lambda g, shape: g.uniform(a, b, shape), generator)

    def normal_(self, mean: float = 0.0, std: float = 1.0, generator: Any = None) -> Any:
        """Fill with samples of N(mean, std²).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(2).normal_(5.0, 0.0).tolist()
        [5.0, 5.0]
        """
        return self._fill_drawn(lambda g, shape: g.normal(mean, std, shape), generator)

    def logical_not(self) -> Any:
        """Whether each element is zero (booleans).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([0.0, 2.0]).logical_not().tolist()
        [True, False]
        """
        return self._apply(ops.logical_not, self._node)

    def short(self) -> Any:
        """A copy as int16.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([2.7]).short().tolist()
        [2]
        """
        return self.to(np.dtype(np.int16))

    def char(self) -> Any:
        """A copy as int8.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([-2.7]).char().tolist()
        [-2]
        """
        return self.to(np.dtype(np.int8))

    def clip(self, min: Any = None, max: Any = None) -> Any:
        """``clamp``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([-2.0, 2.0]).clip(-1, 1).tolist()
        [-1.0, 1.0]
        """
        return self.clamp(min, max)

    def clip_(self, min: Any = None, max: Any = None) -> Any:
        """``clamp_``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([3.0]).clip_(max=1.0).tolist()
        [1.0]
        """
        return self.clamp_(min, max)

    def trace(self) -> Any:
        """The sum of a matrix's diagonal.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.eye(3).trace().item()
        3.0
        """
        if self.dtype == bool:
            raise NotImplementedError("\"trace\" not implemented for 'Bool'")
        if self.dim() != 2:
            raise RuntimeError(f"trace: expected a matrix, but got tensor with dim "
                               f"{self.dim()}")
        return self.diagonal().sum()

    def fmax(self, other: Any) -> Any:
        """The larger of each pair of elements, a NaN giving way to a number.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([float("nan"), 1.0]).fmax(pargraph.tensor([2.0, 0.0])).tolist()
        [2.0, 1.0]
        """
        return self._past_nan(other, "maximum")

    def fmin(self, other: Any) -> Any:
        """The smaller of each pair of elements, a NaN giving way to a number.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([float("nan"), 1.0]).fmin(pargraph.tensor([2.0, 0.0])).tolist()
        [2.0, 0.0]
        """
        return self._past_nan(other, "minimum")

    def _past_nan(self, other: Any, extreme: str) -> Any:
        """``maximum`` or ``minimum`` (``extreme``) where a NaN gives way to the other value,
        in the two operands' common dtype (bfloat16 with float16: float32)."""
        other = other if hasattr(other, "_node") else self._constant(other, self.dtype)
        common = ops.result_dtype(self._node, other._node)
        x, other = self.to(common), other.to(common)
        return getattr(x, extreme)(other).where(~(x.isnan() | other.isnan()),
                                                x.where(other.isnan(), other))

    def isposinf(self) -> Any:
        """Whether each element is +inf.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([float("inf"), float("-inf")]).isposinf().tolist()
        [True, False]
        """
        return self.isinf() & (self > 0)

    def isneginf(self) -> Any:
        """Whether each element is -inf.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([float("inf"), float("-inf")]).isneginf().tolist()
        [False, True]
        """
        return self.isinf() & (self < 0)

    def isreal(self) -> Any:
        """Whether each element is real: all are (tensors are real).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1.0]).isreal().tolist()
        [True]
        """
        return self._constant(np.ones(tuple(self.shape), bool))

    def is_signed(self) -> bool:
        """Whether the dtype has a sign (not bool or uint8).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1], dtype=pargraph.uint8).is_signed()
        False
        """
        return np.dtype(self.dtype) not in (np.dtype(np.bool_), np.dtype(np.uint8))

    def is_same_size(self, other: Any) -> bool:
        """Whether the two shapes are equal.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(2).is_same_size(pargraph.zeros(2))
        True
        """
        return tuple(self.shape) == tuple(other.shape)

    @property
    def real(self) -> Any:
        """This tensor (it is real).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1.5]).real.tolist()
        [1.5]
        """
        return self

    @property
    def imag(self) -> Any:
        """Raises, as PyTorch does for a real tensor."""
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")

    def conj(self) -> Any:
        """This tensor (its conjugate: it is real).

        Examples
        --------
        >>> import pargraph
        >>> x = pargraph.ones(1); x.conj() is x
        True
        """
        return self

    def tril_(self, diagonal: int = 0) -> Any:
        """``tril`` in place.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(2, 2).tril_().tolist()
        [[1.0, 0.0], [1.0, 1.0]]
        """
        return self._in_place(self.tril(diagonal))

    def triu_(self, diagonal: int = 0) -> Any:
        """``triu`` in place.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(2, 2).triu_().tolist()
        [[1.0, 1.0], [0.0, 1.0]]
        """
        return self._in_place(self.triu(diagonal))

    def cumsum_(self, dim: int, dtype: Any = None) -> Any:
        """``cumsum`` in place.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(3).cumsum_(0).tolist()
        [1.0, 2.0, 3.0]
        """
        return self._in_place(self.cumsum(dim, dtype=dtype).to(self.dtype))

    def fill_diagonal_(self, fill_value: Any, wrap: bool = False) -> Any:
        """Write ``fill_value`` on the main diagonal (all dimensions of equal length, or a
        matrix; ``wrap``: a tall matrix's diagonal starts again every ``columns + 1`` rows).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(2, 3).fill_diagonal_(5.0).tolist()
        [[5.0, 0.0, 0.0], [0.0, 5.0, 0.0]]
        """
        if self.dim() < 2:
            raise RuntimeError("dimensions must larger than 1")
        if self.dim() > 2 and len(set(self.shape)) != 1:
            raise RuntimeError("all dimensions of input must be of equal length")
        mask = np.zeros(tuple(self.shape), bool)
        if self.dim() == 2:
            rows, columns = self.shape
            positions = np.arange(0, rows * columns, columns + 1)
            if not wrap:
                positions = positions[positions < min(rows, columns) * columns]
            mask.reshape(-1)[positions] = True
        else:
            mask[(np.arange(self.shape[0]),) * self.dim()] = True
        return self._in_place(self.masked_fill(self._constant(mask), fill_value))

    def _fill_drawn(self, draw: Any, generator: Any) -> Any:
        """Fill with ``draw(numpy generator, shape)``: a random leaf, which a compiled step
        draws again at every replay (``factories.drawn``)."""
        source = ops.defaults.generator if generator is None else generator.numpy_generator
        shape, dtype = tuple(self.shape), self.dtype
        return self.copy_(self._drawn(lambda: np.asarray(draw(source, shape)).astype(dtype)))

    def bernoulli_(self, p: float = 0.5, *, generator: Any = None) -> Any:
        """Fill with draws of Bernoulli(``p``): ones with probability ``p`` (a number or a
        tensor of probabilities), zeros otherwise.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(3).bernoulli_(1.0).tolist()
        [1.0, 1.0, 1.0]
        """
        if hasattr(p, "_node"):  # a tensor of probabilities: compared in the graph
            uniform = self.new_zeros(tuple(self.shape))
            uniform._fill_drawn(lambda g, shape: g.random(shape), generator)
            return self.copy_((uniform < p).to(self.dtype))
        return self._fill_drawn(lambda g, shape: g.random(shape) < p, generator)

    def exponential_(self, lambd: float = 1.0, *, generator: Any = None) -> Any:
        """Fill with draws of the exponential distribution of rate ``lambd``.

        Examples
        --------
        >>> import pargraph
        >>> bool((pargraph.zeros(100).exponential_(2.0) >= 0).all())
        True
        """
        return self._fill_drawn(lambda g, shape: g.exponential(1.0 / lambd, shape), generator)

    def geometric_(self, p: float, *, generator: Any = None) -> Any:
        """Fill with draws of the geometric distribution: the number of Bernoulli(``p``)
        trials up to the first success (1, 2, ...).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(2).geometric_(1.0).tolist()
        [1.0, 1.0]
        """
        return self._fill_drawn(lambda g, shape: g.geometric(p, shape), generator)

    def log_normal_(self, mean: float = 1.0, std: float = 2.0, *, generator: Any = None) -> Any:
        """Fill with draws whose logarithm is N(``mean``, ``std``²).

        Examples
        --------
        >>> import pargraph
        >>> bool((pargraph.zeros(10).log_normal_() > 0).all())
        True
        """
        return self._fill_drawn(lambda g, shape: g.lognormal(mean, std, shape), generator)

    def cauchy_(self, median: float = 0.0, sigma: float = 1.0, *, generator: Any = None) -> Any:
        """Fill with draws of the Cauchy distribution.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(2).cauchy_(3.0, 0.0).tolist()
        [3.0, 3.0]
        """
        return self._fill_drawn(
            lambda g, shape: median + sigma * g.standard_cauchy(shape), generator)

    def random_(self, from_: int = 0, to: int | None = None, *, generator: Any = None) -> Any:
        """Fill with integers drawn uniformly from ``[from_, to - 1]`` (``random_(to)``: from
        0; without ``to``, up to what the dtype holds exactly: 2**24 for float32).

        Examples
        --------
        >>> import pargraph
        >>> bool((pargraph.zeros(20).random_(3, 5) >= 3).all())
        True
        """
        if to is None and from_ != 0:  # random_(to)
            from_, to = 0, from_
        if to is None:  # the largest integer the dtype holds exactly
            kind = np.dtype(self.dtype)
            if kind == ops.BFLOAT16:
                to = 2 ** 8 + 1
            elif ops.is_floating(kind):
                to = {2: 2 ** 11, 4: 2 ** 24, 8: 2 ** 53}[kind.itemsize] + 1
            else:
                to = 2 if kind == np.bool_ else int(np.iinfo(kind).max)
        if from_ >= to:
            raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={from_} "
                               f">= to={to}")
        return self._fill_drawn(lambda g, shape: g.integers(from_, to, shape), generator)

    def unfold(self, dimension: int, size: int, step: int) -> Any:
        """The slices of ``size`` elements along ``dimension``, every ``step``: that
        dimension becomes the slices' count, and a new last one holds each slice.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.arange(5).unfold(0, 2, 2).tolist()
        [[0, 1], [2, 3]]
        """
        d = ops.normalize_dim(dimension, max(self.dim(), 1))
        length = self.shape[d] if self.dim() else 1
        if size > length:
            raise RuntimeError(f"maximum size for tensor at dimension {d} is {length} but size "
                               f"is {size}")
        if step <= 0:
            raise RuntimeError(f"step is {step} but must be > 0")
        count = (length - size) // step + 1
        picked = (np.arange(count)[:, None] * step + np.arange(size)[None, :]).reshape(-1)
        x = self if self.dim() else self.reshape(1)
        taken = x.index_select(d, self._constant(picked))
        shape = tuple(x.shape[:d]) + (count, size) + tuple(x.shape[d + 1:])
        return taken.reshape(shape).movedim(d + 1, -1)

    @property
    def itemsize(self) -> int:
        """The bytes one element takes."""
        return np.dtype(self.dtype).itemsize

    @property
    def nbytes(self) -> int:
        """The bytes the elements take."""
        return self.numel() * self.itemsize

    def index_put_(self, indices: Any, values: Any, accumulate: bool = False) -> Any:
        """``self[indices] = values`` (``accumulate``: ``+=``, repeated indices adding up).

        Examples
        --------
        >>> import pargraph
        >>> x = pargraph.zeros(3)
        >>> x.index_put_((pargraph.tensor([0, 0]),), pargraph.tensor(1.0), accumulate=True)
        tensor([2., 0., 0.])
        """
        key = tuple(indices)
        if not accumulate:
            self[key] = values
            return self
        values = values if hasattr(values, "_node") else self._constant(values, self.dtype)
        target = self[key]
        spec, index_nodes = self._index_spec(key, tuple(self.shape))
        spread = values.to(self.dtype).expand(target.shape)
        added = ops.index_add(spread._node, *index_nodes, shape=tuple(self.shape), spec=spec)
        return self._in_place(self + self._wrap(added))

    def index_put(self, indices: Any, values: Any, accumulate: bool = False) -> Any:
        """A copy with ``index_put_`` applied.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(2).index_put((pargraph.tensor([1]),), pargraph.tensor(5.0)).tolist()
        [0.0, 5.0]
        """
        return self.clone().index_put_(indices, values, accumulate)

    def put_(self, index: Any, source: Any, accumulate: bool = False) -> Any:
        """Write (``accumulate``: add) ``source`` at the flat positions ``index``, as if this
        tensor were one-dimensional.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(2, 2).put_(pargraph.tensor([3]), pargraph.tensor([7.0])).tolist()
        [[0.0, 0.0], [0.0, 7.0]]
        """
        index = index if hasattr(index, "_node") else self._constant(index)
        flat = self.reshape(-1).index_put((index.reshape(-1),), source.reshape(-1), accumulate)
        return self._in_place(flat.reshape(tuple(self.shape)))

    def put(self, index: Any, source: Any, accumulate: bool = False) -> Any:
        """A copy with ``put_`` applied.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(3).put(pargraph.tensor([0]), pargraph.tensor([1.0])).tolist()
        [1.0, 0.0, 0.0]
        """
        return self.clone().put_(index, source, accumulate)

    def bitwise_not(self) -> Any:
        """Each bit flipped (``logical_not`` for booleans).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([0, 5]).bitwise_not().tolist()
        [-1, -6]
        """
        if ops.is_floating(np.dtype(self.dtype)):
            raise RuntimeError("\"bitwise_not_cpu\" not implemented for 'Float'")
        return ~self

    def detach_(self) -> Any:
        """Detach this tensor from its graph, in place (it becomes a leaf).

        Examples
        --------
        >>> import pargraph
        >>> x = pargraph.ones(1, requires_grad=True) * 2
        >>> x.detach_().requires_grad
        False
        """
        self._replace(self.detach()._node)
        self.requires_grad_(False)
        return self

    def byte(self) -> Any:
        """This tensor as ``uint8``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1.7, 300.0]).byte().tolist()
        [1, 44]
        """
        return self.to(np.dtype(np.uint8))

    def cuda(self, device: Any = None, non_blocking: bool = False) -> Any:
        """No CUDA here: raises, as PyTorch built without CUDA does."""
        raise AssertionError("Torch not compiled with CUDA enabled (pargraph computes on the "
                             "CPU; drop .cuda() or use .to(device) with a CPU device)")

    def add_(self, other: Any, *, alpha: float = 1) -> Any:
        self._check_in_place()
        alpha = checked_alpha(self, other, alpha)
        if alpha != 1:
            other = self._apply(ops.mul, self._operand(other), self._operand(alpha))
        return self._rebind(self._apply(ops.add, self, self._operand(other))._node)

    def sub_(self, other: Any, *, alpha: float = 1) -> Any:
        self._check_in_place()
        alpha = checked_alpha(self, other, alpha)
        if alpha != 1:
            other = self._apply(ops.mul, self._operand(other), self._operand(alpha))
        return self._rebind(self._apply(ops.sub, self, self._operand(other))._node)

    def mul_(self, other: Any) -> Any:
        self._check_in_place()
        return self._rebind(self._apply(ops.mul, self, self._operand(other))._node)

    def clamp_(self, min: Any = None, max: Any = None) -> Any:
        self._check_in_place()
        return self._rebind(self.clamp(min, max)._node)

    def pow_(self, exponent: Any) -> Any:
        self._check_in_place()
        return self._rebind(self._apply(ops.pow_, self, self._operand(exponent))._node)

    def div_(self, other: Any) -> Any:
        self._check_in_place()
        return self._rebind(self._apply(ops.div, self, self._operand(other))._node)

    def fill_(self, value: float) -> Any:
        self._check_in_place()
        ops.check_fits(value, self.dtype)
        return self._rebind(ops.constant(np.full(self.shape, value, dtype=self.dtype)))

    def zero_(self) -> Any:
        """Set every element to zero, in place.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(2).zero_()
        tensor([0., 0.])
        """
        return self.fill_(0)

    # ``w -= lr * w.grad`` is in place, as in PyTorch: the tensor object stays the same, so a
    # loop variable over ``model.parameters()`` updates the model.
    def __iadd__(self, other): return self.add_(other)

    def __isub__(self, other): return self.sub_(other)

    def __imul__(self, other): return self.mul_(other)

    def __itruediv__(self, other): return self.div_(other)

    def __ipow__(self, other): return self.pow_(other)

    def __iand__(self, other): return self.bitwise_and_(other)

    def __ior__(self, other): return self.bitwise_or_(other)

    def __ixor__(self, other): return self.bitwise_xor_(other)

    def __ilshift__(self, other): return self.bitwise_left_shift_(other)

    def __irshift__(self, other): return self.bitwise_right_shift_(other)


#: Elementwise methods whose in-place forms (``sigmoid_``, ``eq_``) are generated below: the
#: out-of-place result, cast to the tensor's dtype (a comparison's booleans become 1 and 0), put
#: in the tensor's place.
IN_PLACE_UNARY = (
    "abs absolute acos acosh arccos arccosh arcsin arcsinh arctan arctanh asin asinh atan atanh "
    "ceil cos cosh deg2rad digamma erf erfc erfinv exp2 expm1 fix floor frac i0 lgamma log log10 "
    "log1p log2 logit logical_not nan_to_num neg negative rad2deg reciprocal round rsqrt sgn "
    "sigmoid sign sin sinc sinh sqrt square tan tanh trunc").split()
IN_PLACE_BINARY = (
    "atan2 arctan2 copysign divide eq floor_divide fmod ge greater greater_equal gt "
    "heaviside hypot le less less_equal lt multiply ne not_equal remainder subtract true_divide "
    "xlogy logical_and logical_or logical_xor ldexp igamma igammac nextafter").split()
#: Binary in-place forms of ops PyTorch has for integers and booleans only.
IN_PLACE_INTEGER = (
    "bitwise_and bitwise_or bitwise_xor bitwise_left_shift bitwise_right_shift gcd lcm").split()


def _in_place_form(name: str, binary: bool, integer: bool = False) -> Any:
    def form(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = getattr(self, name)(*args, **kwargs)
        ops.check_cast(result.dtype, self.dtype)  # sigmoid_ of integers raises
        result = result.to(self.dtype)
        if self.requires_grad and not result.requires_grad:  # a comparison: as PyTorch, the
            nowhere = self._constant(np.zeros(tuple(self.shape), bool))  # tensor keeps a
            result = self.where(nowhere, result)  # history, its gradient zero
        return self._in_place(result)

    argument = ("pargraph.tensor([2])" if integer else "pargraph.tensor([2.0])") if binary \
        else ""
    start = "pargraph.tensor([6])" if integer else "pargraph.tensor([0.5])"
    form.__name__ = form.__qualname__ = f"{name}_"
    form.__doc__ = (f"``{name}`` in place.\n\n        Examples\n        --------\n"
                    f"        >>> import pargraph\n        >>> x = {start}\n"
                    f"        >>> x.{name}_({argument}) is x\n        True\n        ")
    return form


for _name in IN_PLACE_UNARY:
    setattr(InPlaceMethods, f"{_name}_", _in_place_form(_name, False))
for _name in IN_PLACE_BINARY:
    setattr(InPlaceMethods, f"{_name}_", _in_place_form(_name, True))
for _name in IN_PLACE_INTEGER:
    setattr(InPlaceMethods, f"{_name}_", _in_place_form(_name, True, integer=True))
del _name


def checked_alpha(x: Any, other: Any, alpha: Any) -> Any:
    """``add``'s and ``sub``'s ``alpha`` checked against the result's dtype as PyTorch does,
    and as the result's dtype takes it (a bool result: whether it is nonzero)."""
    if type(alpha) is int and alpha == 1:
        return alpha
    kind = ops.result_dtype(x._node, x._operand(other)).kind
    if isinstance(alpha, bool) and kind != "b":
        raise RuntimeError("Boolean alpha only supported for Boolean results.")
    if kind in "biu" and not isinstance(alpha, (int, np.integer)):
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating "
                           "point number.")
    return bool(alpha) if kind == "b" else alpha
