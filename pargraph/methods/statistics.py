"""Tensor methods that summarize values: NaN-aware reductions, moments, histograms, covariance,
differences."""

from __future__ import annotations

from typing import Any

import numpy as np

from pargraph import ops


class StatisticsMethods:
    """Tensor's summaries of values: a mixin of ``Tensor`` (``pargraph.methods`` says what the
    class it joins has)."""

    def mode(self, dim: int = -1, keepdim: bool = False) -> Any:
        """The most frequent value along ``dim`` (the smallest of several) and its index (its
        last occurrence), as ``torch.mode``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[1.0, 2.0, 2.0, 3.0], [4.0, 4.0, 1.0, 1.0]]).mode(1).values.tolist()
        [2.0, 1.0]
        """
        from pargraph.selection import ModeResult

        if not self.dim():
            return ModeResult(self.clone(), self._constant(np.zeros((), np.int64)))
        d = ops.normalize_dim(dim, self.dim())
        index = self._apply(ops.mode_index, self._node, dim=d)
        values = self.gather(d, index)
        if not keepdim:
            values, index = values.squeeze(d), index.squeeze(d)
        return ModeResult(values, index)

    def histc(self, bins: int = 100, min: float = 0, max: float = 0) -> Any:
        """Counts in ``bins`` equal bins over ``[min, max]`` (the data's range when both are
        equal), as ``torch.histc``; not differentiable.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1.0, 2.0, 1.0, 2.5, 4.0]).histc(bins=4, min=0, max=3).tolist()
        [0.0, 2.0, 1.0, 1.0]
        """
        if bins <= 0:
            raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for "
                               "dimension 0")
        if min > max:
            raise RuntimeError("torch.histc: max must be larger than min")
        return self._apply(ops.histc, self.detach()._node, bins=int(bins), low=float(min),
                                    high=float(max))

    def diff(self, n: int = 1, dim: int = -1, prepend: Any = None, append: Any = None) -> Any:
        """The ``n``-th forward difference along ``dim`` (``x[i + 1] - x[i]``; for booleans,
        whether they differ), after ``prepend`` and ``append`` join the ends.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1.0, 4.0, 9.0]).diff().tolist()
        [3.0, 5.0]
        """
        if self.ndim == 0:
            raise RuntimeError("diff expects input to be at least one-dimensional")
        if n < 0:
            raise RuntimeError(f"order must be non-negative but got {n}")
        dim = ops.normalize_dim(dim, self.ndim)
        parts = [t if t.ndim else t.expand(*self.shape[:dim], 1, *self.shape[dim + 1:])
                 for t in (prepend, self, append) if t is not None]
        x = self._apply(ops.cat, *[t._node for t in parts], dim=dim) if len(parts) > 1 else self
        for _ in range(min(n, x.shape[dim])):
            later, earlier = x.narrow(dim, 1, x.shape[dim] - 1), \
                x.narrow(dim, 0, x.shape[dim] - 1)
            x = later != earlier if x.dtype == np.bool_ else later - earlier
        return x

    def nansum(self, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Any:
        """``sum`` with NaN counted as zero.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1.0, float("nan"), 2.0]).nansum().item()
        3.0
        """
        x = self.masked_fill(self.isnan(), 0) if self.dtype.kind == "f" else self
        return x.sum(dim, keepdim, dtype=dtype)

    def nanmean(self, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Any:
        """``mean`` of the values that are not NaN.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1.0, float("nan"), 2.0]).nanmean().item()
        1.5
        """
        if self.dtype.kind != "f" and not ops.is_floating(self.dtype):
            raise RuntimeError("nanmean(): expected input to have floating point or complex "
                               f"dtype but got {ops.torch_name(self.dtype)}")
        kept = (~self.isnan()).sum(dim, keepdim)
        return self.nansum(dim, keepdim, dtype=dtype) / kept

    def count_nonzero(self, dim: Any = None) -> Any:
        """How many values are not zero (over ``dim``, an int or a tuple, or all).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([0.0, 2.0, 3.0]).count_nonzero().item()
        2
        """
        return (self != 0).sum(dim) if dim is not None else (self != 0).sum()

    def std_mean(self, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False,
                 *, correction: Any = None) -> tuple:
        """``(std, mean)`` over ``dim``.

        Examples
        --------
        >>> import pargraph
        >>> [t.item() for t in pargraph.tensor([1.0, 3.0]).std_mean()]
        [1.4142135381698608, 2.0]
        """
        return (self.std(dim, unbiased, keepdim, correction=correction),
                self.mean(dim, keepdim))

    def var_mean(self, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False,
                 *, correction: Any = None) -> tuple:
        """``(var, mean)`` over ``dim``.

        Examples
        --------
        >>> import pargraph
        >>> [t.item() for t in pargraph.tensor([1.0, 3.0]).var_mean()]
        [2.0, 2.0]
        """
        return (self.var(dim, unbiased, keepdim, correction=correction),
                self.mean(dim, keepdim))

    def dist(self, other: Any, p: float = 2) -> Any:
        """The ``p``-norm of ``self - other``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([0.0, 0.0]).dist(pargraph.tensor([3.0, 4.0])).item()
        5.0
        """
        return (self - other).norm(p)

    def renorm(self, p: float, dim: int, maxnorm: float) -> Any:
        """Each slice along ``dim`` whose ``p``-norm exceeds ``maxnorm`` scaled down to it.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[3.0, 4.0], [0.3, 0.4]]).renorm(2, 0, 1.0).tolist()[1]
        [0.30000001192092896, 0.4000000059604645]
        """
        dim = ops.normalize_dim(dim, self.ndim)
        others = tuple(d for d in range(self.ndim) if d != dim)
        norms = self.norm(p, others, keepdim=True) if others else self.abs()
        scale = (maxnorm / (norms + 1e-7)).masked_fill(norms <= maxnorm, 1.0)
        return self * scale

    def cov(self, *, correction: int = 1, fweights: Any = None, aweights: Any = None) -> Any:
        """The covariance matrix of the variables in the rows (observations in the columns),
        with frequency and observation weights, as ``torch.cov``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[1.0, 5.0], [4.0, 2.0]]).cov().tolist()
        [[8.0, -4.0], [-4.0, 2.0]]
        """
        if self.dtype == bool:
            raise RuntimeError("cov(): bool dtype is not supported for input")
        if self.ndim > 2:
            raise RuntimeError("cov(): expected input to have two or fewer dimensions but got "
                               f"an input with {self.ndim} dimensions")
        x = self.reshape(1, -1) if self.ndim < 2 else self
        if x.dtype.kind != "f":
            x = x.to(np.float32)
        weights = None
        for name, w in (("fweights", fweights), ("aweights", aweights)):
            if w is not None:
                if w.ndim > 1 or w.shape[0] != x.shape[1]:
                    raise RuntimeError(f"cov(): expected {name} to have one dimension and the "
                                       "same number of elements as the number of observations")
                weights = w if weights is None else weights * w
        total = weights.sum() if weights is not None else x.shape[1]
        mean = (x * weights).sum(1) / total if weights is not None else x.mean(1)
        if weights is None:
            factor = x.shape[1] - correction
        elif correction == 0:
            factor = total
        elif aweights is None:
            factor = total - correction
        else:
            factor = total - correction * (weights * aweights).sum() / total
        centered = x - mean.unsqueeze(1)
        weighted = centered * weights if weights is not None else centered
        product = weighted @ centered.transpose(0, 1)
        if isinstance(factor, (int, float)):
            return (product / max(factor, 0)).squeeze()
        return (product / factor.clamp(min=0)).squeeze()

    def corrcoef(self) -> Any:
        """The correlation coefficients of the variables in the rows (``cov`` over the
        products of the standard deviations, clipped to [-1, 1]).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[1.0, 5.0], [4.0, 2.0]]).corrcoef().tolist()
        [[1.0, -1.0], [-1.0, 1.0]]
        """
        c = self.cov()
        if c.ndim == 0:
            return c / c
        d = c.diagonal()
        stddev = d.sqrt()
        c = c / stddev.unsqueeze(1) / stddev.unsqueeze(0)
        return c.clamp(-1, 1)

    def logcumsumexp(self, dim: int) -> Any:
        """``log(cumsum(exp(x)))`` along ``dim``, without overflow or underflow.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([-1000.0, 0.0]).logcumsumexp(0).tolist()
        [-1000.0, 0.0]
        """
        if self.ndim == 0:
            return self * 1
        return self._apply(ops.logcumsumexp, self._node, dim=ops.normalize_dim(dim, self.ndim))
