"""Tensor methods that reduce: sums and means, extremes and their indices, variance, norms,
logical reductions, softmax over a dimension and running sums."""

from __future__ import annotations

import math
import warnings
from collections import namedtuple
from typing import Any

import numpy as np

from pargraph import ops
from pargraph.autograd.mode import no_grad
from pargraph.graph import user_stacklevel

#: ``max(dim)``'s and ``min(dim)``'s result, as PyTorch's ``return_types``.
MinMax = namedtuple("MinMax", ["values", "indices"])


class ReductionMethods:
    """Tensor's reductions: a mixin of ``Tensor`` (``pargraph.methods`` says what the class it
    joins has)."""

    def sum(self, dim=None, keepdim: bool = False, dtype=None) -> Any:
        x = self if dtype is None else self.to(dtype)
        out = ops.sum_(x._node, dim=ops.normalize_dims(dim, self.ndim), keepdim=keepdim)
        return self._wrap(out if dim is None else ops.shown_as(out, "SumBackward1"))

    def mean(self, dim=None, keepdim: bool = False, *, dtype: Any = None) -> Any:
        """The mean over ``dim`` (all by default), in ``dtype`` if given; integer tensors
        need one, as in PyTorch.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1, 2]).mean(dtype=pargraph.float32).item()
        1.5
        """
        if dtype is not None:
            return self.to(dtype).mean(dim, keepdim)
        if not ops.is_floating(self.dtype) and self.dtype.kind != "c":
            raise RuntimeError("mean(): could not infer output dtype. Input dtype must be "
                               "either a floating point or complex dtype. Got: "
                               f"{ops.torch_name(self.dtype)}")
        return self._apply(ops.mean, self._node, dim, keepdim=keepdim)

    def prod(self, dim=None, keepdim: bool = False) -> Any:
        if dim is not None and not isinstance(dim, (int, np.integer)):
            raise TypeError(f"prod(): argument 'dim' must be int, not {type(dim).__name__}")
        dims = ops.normalize_dims(dim, self.ndim)
        return self._apply(ops.prod, self._node, dim=dims, keepdim=keepdim)

    def max(self, dim=None, keepdim: bool = False):
        """The maximum; with ``dim``, the ``(values, indices)`` along it."""
        return _extreme(self, dim, keepdim, ops.amax, ops.argmax, other_op=ops.maximum)

    def min(self, dim=None, keepdim: bool = False):
        """The minimum; with ``dim``, the ``(values, indices)`` along it."""
        return _extreme(self, dim, keepdim, ops.amin, ops.argmin, other_op=ops.minimum)

    def amax(self, dim=None, keepdim: bool = False) -> Any:
        return self._apply(ops.amax, self._node, dim=ops.normalize_dims(dim, self.ndim),
                              keepdim=keepdim)

    def amin(self, dim=None, keepdim: bool = False) -> Any:
        return self._apply(ops.amin, self._node, dim=ops.normalize_dims(dim, self.ndim),
                              keepdim=keepdim)

    def argmax(self, dim=None, keepdim: bool = False) -> Any:
        if self.dtype == bool:
            raise RuntimeError("argmax(): does not support bool input")
        d = None if dim is None else ops.normalize_dim(dim, self.ndim)
        return self._apply(ops.argmax, self._node, dim=d, keepdim=keepdim)

    def argmin(self, dim=None, keepdim: bool = False) -> Any:
        if self.dtype == bool:
            raise RuntimeError("argmin(): does not support bool input")
        d = None if dim is None else ops.normalize_dim(dim, self.ndim)
        return self._apply(ops.argmin, self._node, dim=d, keepdim=keepdim)

    def var(self, dim=None, unbiased: bool | None = None, keepdim: bool = False, *,
            correction: int | None = None) -> Any:
        _floating_only(self, "std and var")
        correction = _correction(unbiased, correction)
        _warn_degrees_of_freedom(self, dim, correction, "var")
        return self._apply(ops.var, self._node, dim, correction, keepdim)

    def std(self, dim=None, unbiased: bool | None = None, keepdim: bool = False, *,
            correction: int | None = None) -> Any:
        _floating_only(self, "std and var")
        correction = _correction(unbiased, correction)
        _warn_degrees_of_freedom(self, dim, correction, "std")
        return self._apply(ops.std, self._node, dim, correction, keepdim)

    def all(self, dim: Any = None, keepdim: bool = False) -> Any:
        """Whether every element is nonzero (over ``dim``: an int, a tuple, or all).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[True, False], [True, True]]).all(1).tolist()
        [False, True]
        """
        dims = ops.normalize_dims(dim, self.ndim)
        none_false = ops.sum_(ops.logical_not(self._node), dim=dims, keepdim=keepdim)
        return _uint8_stays(self, self._apply(ops.eq, none_false, 0))

    def any(self, dim: Any = None, keepdim: bool = False) -> Any:
        """Whether any element is nonzero (over ``dim``: an int, a tuple, or all).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[0.0, 2.0], [0.0, 0.0]]).any(1).tolist()
        [True, False]
        """
        dims = ops.normalize_dims(dim, self.ndim)
        return _uint8_stays(self, self._apply(ops.gt, ops.sum_(ops.ne(self._node, 0), dim=dims,
                                                        keepdim=keepdim), 0))

    def softmax(self, dim: int) -> Any:
        return self._apply(ops.softmax, self._node, dim)

    def log_softmax(self, dim: int) -> Any:
        return self._apply(ops.log_softmax, self._node, dim)

    def logsumexp(self, dim, keepdim: bool = False) -> Any:
        if type(dim) in (tuple, list) and not dim:  # every dimension, as PyTorch reads it
            dim = tuple(range(self.ndim))
        return self._apply(ops.logsumexp, self._node, dim, keepdim=keepdim)

    def norm(self, p: Any = 2, dim: Any = None, keepdim: bool = False) -> Any:
        """The ``p``-norm over ``dim`` (all elements by default): 2, 1, ``inf``, ``-inf``, 0
        (the elements not zero) or any other number; ``"fro"`` is the 2-norm of all the
        elements, ``"nuc"`` the nuclear norm of matrices.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[3.0, 4.0]]).norm(2, 1, keepdim=True)
        tensor([[5.]])
        """
        if not ops.is_floating(self.dtype) and self.dtype.kind != "c":
            raise RuntimeError("linalg.vector_norm: Expected a floating point or complex tensor "
                               f"as input. Got {ops.torch_name(self.dtype)}")
        if p == "fro":
            p = 2
        if p == "nuc":  # the sum of the singular values, over the last two dims or ``dim``
            rows, columns = (ops.normalize_dim(d, self.ndim) for d in
                             ((-2, -1) if dim is None else dim))
            out = self._apply(ops.svdvals, self.movedim((rows, columns), (-2, -1))).sum(-1)
            if keepdim:
                out = out.unsqueeze(min(rows, columns)).unsqueeze(max(rows, columns))
            return out
        if not isinstance(p, (int, float)) or isinstance(p, bool):
            raise NotImplementedError(f"norm: p={p!r} is not supported (expected a number, "
                                      "inf, -inf, 'fro' or 'nuc')")
        if p == 0:  # how many elements are not zero (no gradient)
            return self.ne(0).sum(dim, keepdim).to(self.dtype)
        magnitude = self.abs()
        if p == np.inf:
            return magnitude.amax(dim, keepdim)
        if p == -np.inf:
            return magnitude.amin(dim, keepdim)
        if p == 2:
            return self._apply(ops.norm, self._node, dim=ops.normalize_dims(dim, self.ndim),
                                  keepdim=keepdim)
        if p == 1:
            return magnitude.sum(dim, keepdim)
        total = (magnitude ** p).sum(dim, keepdim)
        # The root's gradient is infinite at 0: the norm of zeros gets none, as PyTorch's.
        nonzero = total > 0
        root = total.where(nonzero, 1.0) ** (1.0 / p)
        return root.where(nonzero, 0.0)

    def cumsum(self, dim: int, dtype: Any = None) -> Any:
        """Running sums along ``dim`` (in ``dtype``, the input cast to it first, if given).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1, 2, 3]).cumsum(0).tolist()
        [1, 3, 6]
        """
        x = self if dtype is None else self.to(dtype)
        return self._apply(ops.cumsum, x._node, dim=ops.normalize_dim(dim, x.ndim))


def _extreme(x: Any, dim, keepdim: bool, reduce_op, arg_op, other_op):
    if isinstance(dim, ReductionMethods):  # a tensor: the elementwise extreme
        return x._apply(other_op, x._operand(x), x._operand(dim))
    if dim is None:
        if 0 in x.shape:
            name = "max" if reduce_op is ops.amax else "min"
            raise RuntimeError(f"{name}(): Expected reduction dim to be specified for "
                               "input.numel() == 0. Specify the reduction dim with the 'dim' "
                               "argument.")
        return x._apply(reduce_op, x._node, dim=ops.normalize_dims(None, x.ndim))
    d = ops.normalize_dim(dim, x.ndim)
    with no_grad():
        indices = arg_op(x._node, dim=d, keepdim=True)
    values = ops.take_along_dim(x._node, indices, dim=d)
    if not keepdim:
        values = ops.squeeze(values, d)
        indices = ops.squeeze(indices, d)
    return MinMax(x._wrap(values), x._wrap(indices))


def _correction(unbiased: bool | None, correction: int | None) -> int:
    if correction is not None:
        return correction
    return 0 if unbiased is False else 1


def _warn_degrees_of_freedom(x: Any, dim: Any, correction: float, name: str) -> None:
    """PyTorch's warning when a variance divides by zero or less (its value is inf or nan)."""
    count = math.prod(x.shape[d] for d in ops.normalize_dims(dim, x.ndim))
    if count - correction <= 0:
        warnings.warn(f"{name}(): degrees of freedom is <= 0. Correction should be strictly "
                      "less than the reduction factor (input numel divided by output numel).",
                      UserWarning, stacklevel=user_stacklevel())


def _floating_only(x: Any, name: str) -> None:
    if not ops.is_floating(x.dtype) and x.dtype.kind != "c":
        raise RuntimeError(f"{name} only support floating point and complex dtypes")


def _uint8_stays(x: Any, result: Any) -> Any:
    """``any``/``all`` of a uint8 tensor are uint8 in PyTorch (of any other dtype, bool)."""
    return result.to(x.dtype) if x.dtype == np.uint8 else result
