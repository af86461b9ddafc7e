"""Python's operators on tensors (``+``, ``@``, ``==``, ``~``, ...) and the named methods
that are the same ops (``add``, ``mul``, ``div``, ``eq``, ``maximum``, ``where``, ...)."""

from __future__ import annotations

from typing import Any

import numpy as np

from pargraph import amp, ops
from pargraph.methods.in_place import checked_alpha


class OperatorMethods:
    """Tensor's operators and their named forms: a mixin of ``Tensor`` (``pargraph.methods``
    says what the class it joins has)."""

    def __add__(self, other):
        return self._apply(ops.add, self, self._operand(other))

    def __radd__(self, other):
        return self._apply(ops.add, self._operand(other), self)

    def __sub__(self, other):
        return self._apply(ops.sub, self, self._operand(other))

    def __rsub__(self, other):
        return self._apply(ops.sub, self._operand(other), self)

    def __mul__(self, other):
        return self._apply(ops.mul, self, self._operand(other))

    def __rmul__(self, other):
        return self._apply(ops.mul, self._operand(other), self)

    def __truediv__(self, other):
        return self._apply(ops.div, self, self._operand(other))

    def __rtruediv__(self, other):
        return self._apply(ops.div, self._operand(other), self)

    def __pow__(self, other):
        return self._apply(ops.pow_, self, self._operand(other))

    def __rpow__(self, other):
        return self._apply(ops.pow_, self._operand(other), self)

    @amp.autocasts("lower")
    def __matmul__(self, other):
        return self._apply(ops.matmul, self, self._operand(other))

    @amp.autocasts("lower")
    def __rmatmul__(self, other):
        return self._apply(ops.matmul, self._operand(other), self)

    def __neg__(self):
        return self._apply(ops.neg, self._node)

    def __pos__(self):
        return self

    def __abs__(self):
        return self.abs()

    def __eq__(self, other):  # type: ignore[override]
        if other is None:  # PyTorch's answer for None
            return False
        return self._apply(ops.eq, self, self._operand(other))

    def __ne__(self, other):  # type: ignore[override]
        if other is None:
            return True
        return self._apply(ops.ne, self, self._operand(other))

    def __lt__(self, other):
        return self._apply(ops.lt, self, self._operand(other))

    def __le__(self, other):
        return self._apply(ops.le, self, self._operand(other))

    def __gt__(self, other):
        return self._apply(ops.gt, self, self._operand(other))

    def __ge__(self, other):
        return self._apply(ops.ge, self, self._operand(other))

    def __and__(self, other):
        return self._apply(ops.bitwise_and, self, self._operand(other))

    def __rand__(self, other):
        return self._apply(ops.bitwise_and, self._operand(other), self)

    def __or__(self, other):
        return self._apply(ops.bitwise_or, self, self._operand(other))

    def __ror__(self, other):
        return self._apply(ops.bitwise_or, self._operand(other), self)

    def __xor__(self, other):
        return self._apply(ops.bitwise_xor, self, self._operand(other))

    def __rxor__(self, other):
        return self._apply(ops.bitwise_xor, self._operand(other), self)

    def __invert__(self):
        if self.dtype.kind not in "biu":
            raise TypeError("~ (operator.invert) is only implemented on integer and "
                            "Boolean-type tensors")
        return self._apply(ops.bitwise_not, self._node)

    def __lshift__(self, other):
        return self._apply(ops.bitwise_left_shift, self, self._operand(other))

    def __rlshift__(self, other):
        return self._apply(ops.bitwise_left_shift, self._operand(other), self)

    def __rshift__(self, other):
        return self._apply(ops.bitwise_right_shift, self, self._operand(other))

    def __rrshift__(self, other):
        return self._apply(ops.bitwise_right_shift, self._operand(other), self)

    mul = __mul__
    pow = __pow__
    matmul = __matmul__
    neg = __neg__
    eq, ne, lt, le, gt, ge = __eq__, __ne__, __lt__, __le__, __gt__, __ge__

    def add(self, other: Any, *, alpha: Any = 1) -> Any:
        """``self + alpha * other``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1.0]).add(pargraph.tensor([2.0]), alpha=3).tolist()
        [7.0]
        """
        alpha = checked_alpha(self, other, alpha)
        return self + (other if alpha == 1 else other * alpha)

    def sub(self, other: Any, *, alpha: Any = 1) -> Any:
        """``self - alpha * other``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([7.0]).sub(pargraph.tensor([1.0]), alpha=3).tolist()
        [4.0]
        """
        alpha = checked_alpha(self, other, alpha)
        return self - (other if alpha == 1 else other * alpha)

    def div(self, other: Any, *, rounding_mode: str | None = None) -> Any:
        """``self / other``; ``rounding_mode`` ``"trunc"`` or ``"floor"`` rounds the quotient
        (integers stay integers then, as in PyTorch).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([7.0, -7.0]).div(2, rounding_mode="floor").tolist()
        [3.0, -4.0]
        """
        if rounding_mode is None:
            return self / other
        if rounding_mode not in ("trunc", "floor"):
            raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or "
                               f"'floor' but found '{rounding_mode}'")
        integral = self.dtype.kind in "iub" and _dtype_of(other).kind in "iub"
        if integral and rounding_mode == "floor":
            return self // other
        # The rounded quotient, whose gradient is zero, as PyTorch's.
        quotient = self / other
        quotient = quotient.trunc() if rounding_mode == "trunc" else quotient.floor()
        return quotient.to(ops.promote_types(self.dtype, _dtype_of(other))) if integral \
            else quotient

    def maximum(self, other: Any) -> Any:
        return self._apply(ops.maximum, self, self._operand(other))

    def minimum(self, other: Any) -> Any:
        return self._apply(ops.minimum, self, self._operand(other))

    def where(self, condition: Any, other: Any) -> Any:
        return self._apply(ops.where, self._operand(condition), self._node, self._operand(other))

    def __contains__(self, element: Any) -> bool:
        """Whether any element equals ``element`` (a number or a tensor), as PyTorch's."""
        if not (hasattr(element, "_node") or isinstance(element, (int, float, bool))):
            raise RuntimeError(f"Tensor.__contains__ only supports Tensor or scalar, but you "
                               f"passed in a {type(element)}.")
        return bool((self == element).any().item())

    def square(self) -> Any:
        if self.dtype.kind == "b":
            return self.to(np.int64) * self.to(np.int64)
        return self * self

    def rsqrt(self) -> Any:
        return 1.0 / self.sqrt()


def _dtype_of(value: Any) -> np.dtype:
    """A tensor's dtype, or the dtype a Python number takes in an op."""
    return value.dtype if hasattr(value, "_node") else ops.scalar_dtype(value)
