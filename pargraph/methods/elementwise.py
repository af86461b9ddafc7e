"""Elementwise Tensor methods beyond the core arithmetic: special functions, remainders, logical
and bitwise ops, comparisons of closeness."""

from __future__ import annotations

import math
from collections import namedtuple
from typing import Any

import ml_dtypes
import numpy as np

from pargraph import ops

#: What ``frexp`` returns, as ``torch.return_types``: a tuple with names.
FrexpResult = namedtuple("frexp", ["mantissa", "exponent"])


class ElementwiseMethods:
    """Tensor's elementwise functions beyond the core arithmetic: a mixin of ``Tensor``
    (``pargraph.methods`` says what the class it joins has)."""

    def polygamma(self, n: int) -> Any:
        """The ``n``-th derivative of ``digamma`` (``torch.polygamma(n, x)``).

        Examples
        --------
        >>> import pargraph
        >>> round(pargraph.tensor([1.0]).polygamma(1).item(), 4)
        1.6449
        """
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise RuntimeError(f"polygamma(n, x) does not support negative n. (n = {n})")
        return self._apply(ops.polygamma, self._node, n=n)

    def bitwise_not_(self) -> Any:
        """:meth:`bitwise_not` in place.

        Examples
        --------
        >>> import pargraph
        >>> x = pargraph.tensor([0, 5])
        >>> x.bitwise_not_().tolist()
        [-1, -6]
        """
        return self._in_place(self.bitwise_not())

    def nextafter(self, other: Any) -> Any:
        """The next floating point value after each element, toward ``other``.

        Examples
        --------
        >>> import pargraph
        >>> (pargraph.tensor([1.0]).nextafter(pargraph.tensor([2.0])) - 1).item() > 0
        True
        """
        return self._apply(ops.nextafter, self._node, self._operand(other))

    def mvlgamma(self, p: int) -> Any:
        """The log of the multivariate gamma function of dimension ``p``: ``p (p - 1) / 4
        log(pi) + sum_j lgamma(x + (1 - j) / 2)``; PyTorch's error where an element is
        ``<= (p - 1) / 2`` (``special.multigammaln``).

        Examples
        --------
        >>> import pargraph
        >>> round(pargraph.tensor([2.5]).mvlgamma(2).item(), 4)
        0.857
        """
        if p < 1:
            raise RuntimeError(f"p has to be greater than or equal to 1, but got {p}")
        if bool((self <= (p - 1) / 2).any().item()):
            raise RuntimeError(f"All elements must be greater than (p-1)/2, but got "
                               f"{(p - 1) / 2}")
        total = p * (p - 1) / 4 * math.log(math.pi)
        terms = [(self + (1 - j) / 2).lgamma() for j in range(1, p + 1)]
        return sum(terms[1:], terms[0]) + total

    def lerp(self, end: Any, weight: Any) -> Any:
        """``self + weight * (end - self)``, as PyTorch computes it: that formula where
        ``|weight| < 0.5``, else ``end - (end - self) * (1 - weight)``, each product added
        with one rounding (a fused multiply-add), float32 and narrower through float64.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(2).lerp(pargraph.ones(2), 0.25).tolist()
        [0.25, 0.25]
        """
        dtype = np.result_type(self.dtype, end.dtype) if hasattr(end, "_node") else self.dtype
        # The float32 the kernel works in (half precision too), its fused additions in float64
        # (the product of two float32 is exact there); float64 as it is.
        work = np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)
        start = self.to(work)
        end = end.to(work) if hasattr(end, "_node") else self._constant(end, work)
        difference = end - start
        if not isinstance(weight, (int, float)) and not hasattr(weight, "_node"):
            # A number a compiled step binds at each call (an Adafactor weight that follows
            # the step count): a 0-d tensor in the work dtype, as the kernel rounds it.
            weight = self._constant(0.0, work) + weight
        small = abs(weight) < 0.5 if isinstance(weight, (int, float)) else weight.abs() < 0.5
        if work == np.float32:
            start, end, difference = start.double(), end.double(), difference.double()
        if isinstance(weight, (int, float)):
            weight = float(np.asarray(weight, work))  # the kernel's weight is its own type
            near = start + difference * weight if small else \
                end - difference * float(np.asarray(1 - weight, work))
        else:
            weight = weight.to(work).to(difference.dtype)
            complement = (1 - weight.to(work)).to(difference.dtype)
            near = (start + difference * weight).where(small, end - difference * complement)
        return near.to(work).to(dtype)

    def addcmul(self, tensor1: Any, tensor2: Any, *, value: float = 1) -> Any:
        """``self + value * tensor1 * tensor2``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(2).addcmul(pargraph.ones(2), pargraph.ones(2) * 3, value=0.5).tolist()
        [2.5, 2.5]
        """
        return self + (tensor1 if value == 1 else tensor1 * value) * tensor2

    def addcdiv(self, tensor1: Any, tensor2: Any, *, value: float = 1) -> Any:
        """``self + value * tensor1 / tensor2``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(2).addcdiv(pargraph.ones(2), pargraph.ones(2) * 4).tolist()
        [1.25, 1.25]
        """
        return self + (tensor1 if value == 1 else tensor1 * value) / tensor2

    def atan2(self, other: Any) -> Any:
        """The angle of (other, self): ``atan(self / other)`` in the right quadrant.

        Examples
        --------
        >>> import pargraph
        >>> round(pargraph.tensor([1.0]).atan2(pargraph.tensor([1.0])).item(), 4)
        0.7854
        """
        return self._apply(ops.atan2, self._node, self._operand(other))

    def remainder(self, other: Any) -> Any:
        """Python's modulo, with the sign of the divisor (``%``).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([-3, 5]).remainder(4).tolist()
        [1, 1]
        """
        return self._apply(ops.remainder, self._node, self._operand(other))

    def round(self, decimals: int = 0) -> Any:
        """Round half to even (to ``decimals`` places).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([0.5, 1.5, 2.567]).round(decimals=1).tolist()
        [0.5, 1.5, 2.5999999046325684]
        """
        return self._apply(ops.round_, self._node, decimals=decimals)

    def __floordiv__(self, other: Any) -> Any:
        return self._apply(ops.floor_divide, self._node, self._operand(other))

    def __rfloordiv__(self, other: Any) -> Any:
        return self._apply(ops.floor_divide, self._operand(other), self._node)

    def __mod__(self, other: Any) -> Any:
        return self.remainder(other)

    def __rmod__(self, other: Any) -> Any:
        return self._apply(ops.remainder, self._operand(other), self._node)

    def floor_divide(self, other: Any) -> Any:
        """``self // other``, rounded toward minus infinity.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([-7, 7]).floor_divide(2).tolist()
        [-4, 3]
        """
        return self // other

    def logical_and(self, other: Any) -> Any:
        """Elementwise ``and`` of truth values.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1, 0]).logical_and(pargraph.tensor([1, 1])).tolist()
        [True, False]
        """
        return self._apply(ops.logical_and, self._node, self._operand(other))

    def logical_or(self, other: Any) -> Any:
        """Elementwise ``or`` of truth values.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1, 0]).logical_or(pargraph.tensor([0, 0])).tolist()
        [True, False]
        """
        return self._apply(ops.logical_or, self._node, self._operand(other))

    def logical_xor(self, other: Any) -> Any:
        """Elementwise ``xor`` of truth values.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1, 0]).logical_xor(pargraph.tensor([1, 1])).tolist()
        [False, True]
        """
        return self._apply(ops.logical_xor, self._node, self._operand(other))

    def bitwise_and(self, other: Any) -> Any:
        """Elementwise ``&`` (``and`` for booleans); integers and booleans only.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([12, 10]).bitwise_and(pargraph.tensor([10, 3])).tolist()
        [8, 2]
        """
        return self._apply(ops.bitwise_and, self._node, self._operand(other))

    def bitwise_or(self, other: Any) -> Any:
        """Elementwise ``|`` (``or`` for booleans); integers and booleans only.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([12, 10]).bitwise_or(pargraph.tensor([10, 3])).tolist()
        [14, 11]
        """
        return self._apply(ops.bitwise_or, self._node, self._operand(other))

    def bitwise_xor(self, other: Any) -> Any:
        """Elementwise ``^`` (``xor`` for booleans); integers and booleans only.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([12, 10]).bitwise_xor(pargraph.tensor([10, 3])).tolist()
        [6, 9]
        """
        return self._apply(ops.bitwise_xor, self._node, self._operand(other))

    def bitwise_left_shift(self, other: Any) -> Any:
        """``self << other``, elementwise on integers; a shift by a negative amount or by the
        width or more gives 0, as in PyTorch.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1, -3]).bitwise_left_shift(2).tolist()
        [4, -12]
        """
        return self._apply(ops.bitwise_left_shift, self._node, self._operand(other))

    def bitwise_right_shift(self, other: Any) -> Any:
        """``self >> other``, elementwise on integers (arithmetic: the sign is kept); a shift
        by a negative amount or by the width or more gives 0 or -1, as in PyTorch.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([16, -16]).bitwise_right_shift(2).tolist()
        [4, -4]
        """
        return self._apply(ops.bitwise_right_shift, self._node, self._operand(other))

    def gcd(self, other: Any) -> Any:
        """The greatest common divisor, elementwise, of integers (``gcd(0, 0)`` is 0).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([12, -18]).gcd(pargraph.tensor([8, 12])).tolist()
        [4, 6]
        """
        return self._apply(ops.gcd, self._node, self._operand(other))

    def lcm(self, other: Any) -> Any:
        """The least common multiple, elementwise, of integers (non-negative, as PyTorch's).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([4, -6]).lcm(pargraph.tensor([6, 4])).tolist()
        [12, 12]
        """
        return self._apply(ops.lcm, self._node, self._operand(other))

    def igamma(self, other: Any) -> Any:
        """The regularized lower incomplete gamma function ``P(self, other)``; differentiable
        in ``other`` (as PyTorch's, not in ``self``).

        Examples
        --------
        >>> import pargraph
        >>> round(pargraph.tensor([1.0]).igamma(pargraph.tensor([1.0])).item(), 4)
        0.6321
        """
        return self._apply(ops.igamma, self._node, self._operand(other))

    def igammac(self, other: Any) -> Any:
        """The regularized upper incomplete gamma function ``1 - P(self, other)``.

        Examples
        --------
        >>> import pargraph
        >>> round(pargraph.tensor([1.0]).igammac(pargraph.tensor([1.0])).item(), 4)
        0.3679
        """
        return self._apply(ops.igammac, self._node, self._operand(other))

    def frexp(self) -> Any:
        """``(mantissa, exponent)`` with ``self == mantissa * 2 ** exponent``, the mantissa's
        magnitude in [0.5, 1) (0, inf and nan stay), the exponent int32; the mantissa's
        gradient is ``grad / 2 ** exponent``, as PyTorch's.

        Examples
        --------
        >>> import pargraph
        >>> m, e = pargraph.tensor([3.0, -0.5]).frexp()
        >>> m.tolist(), e.tolist()
        ([0.75, -0.5], [2, 0])
        """
        if not ops.is_floating(np.dtype(self.dtype)):
            raise RuntimeError("torch.frexp() only supports floating-point dtypes")
        return FrexpResult(self._apply(ops.frexp_mantissa, self._node),
                           self._apply(ops.frexp_exponent, self._node))

    def ldexp(self, other: Any) -> Any:
        """``self * 2 ** other``, computed as PyTorch does (integers give floats).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1.0, 3.0]).ldexp(pargraph.tensor([3, -1])).tolist()
        [8.0, 1.5]
        """
        return self * (2.0 ** self._wrap(self._operand(other)))

    def isclose(self, other: Any, rtol: float = 1e-05, atol: float = 1e-08,
                equal_nan: bool = False) -> Any:
        """Elementwise ``|self - other| <= atol + rtol * |other|`` (infinities equal
        themselves; NaN equal to NaN with ``equal_nan``).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1.0, 2.0]).isclose(pargraph.tensor([1.0, 2.1])).tolist()
        [True, False]
        """
        other = other if hasattr(other, "_node") else self._constant(other)
        if self.dtype != other.dtype:
            raise RuntimeError(f"isclose(): Expected self and other to have the same dtype, "
                               f"but got {ops.torch_name(self.dtype)} and "
                               f"{ops.torch_name(other.dtype)}")
        if rtol < 0 or atol < 0:
            raise RuntimeError(f"isclose(): {'rtol' if rtol < 0 else 'atol'} must be greater "
                               f"than or equal to zero, but got {min(rtol, atol)}")
        if self.dtype == bool:
            return self == other
        # Infinities are close to themselves only: |inf - x| is never within a tolerance.
        within = (self - other).abs() <= (other.abs() * rtol + atol)
        if ops.is_floating(self.dtype):
            within = within & self.isfinite() & other.isfinite()
        close = within | (self == other)
        if equal_nan:
            close = close | (self.isnan() & other.isnan())
        return close

    def equal(self, other: Any) -> bool:
        """Whether both have the same shape and elements.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(2).equal(pargraph.ones(2))
        True
        """
        return tuple(self.shape) == tuple(other.shape) and bool((self == other).all())

    def hypot(self, other: Any) -> Any:
        """sqrt(self^2 + other^2), without overflow.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([3.0]).hypot(pargraph.tensor([4.0])).tolist()
        [5.0]
        """
        return self._apply(ops.hypot, self._node, self._operand(other))

    def logaddexp(self, other: Any) -> Any:
        """log(exp(self) + exp(other)), without overflow.

        Examples
        --------
        >>> import pargraph
        >>> round(pargraph.tensor([0.0]).logaddexp(pargraph.tensor([0.0])).item(), 4)
        0.6931
        """
        return self._apply(ops.logaddexp, self._node, self._operand(other))

    def logaddexp2(self, other: Any) -> Any:
        """log2(2^self + 2^other).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1.0]).logaddexp2(pargraph.tensor([1.0])).tolist()
        [2.0]
        """
        dtype = ops.result_dtype(self._node, other._node)
        if dtype.kind in "biu":  # before the scaling makes them floats: PyTorch's kernel
            raise NotImplementedError(f'"logaddexp2_cpu" not implemented for '
                                      f"'{ops.torch_name(dtype)}'")
        ln2 = math.log(2.0)  # in the common dtype: a float16 scaled alone loses digits
        return (self.to(dtype) * ln2).logaddexp(other.to(dtype) * ln2) / ln2

    def fmod(self, other: Any) -> Any:
        """The remainder with the sign of the dividend (C's ``fmod``).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([-3.0, 3.0]).fmod(2).tolist()
        [-1.0, 1.0]
        """
        return self._apply(ops.fmod, self._node, self._operand(other))

    def copysign(self, other: Any) -> Any:
        """|self| with the sign of ``other`` (a float result).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([2.0, -3.0]).copysign(-1.0).tolist()
        [-2.0, -3.0]
        """
        return self._apply(ops.copysign, self._node, self._operand(other))

    def xlogy(self, other: Any) -> Any:
        """self * log(other), and 0 where self is 0.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([0.0, 2.0]).xlogy(pargraph.tensor([0.0, 1.0])).tolist()
        [0.0, 0.0]
        """
        return self._apply(ops.xlogy, self._node, self._operand(other))

    def deg2rad(self) -> Any:
        """Degrees to radians.

        Examples
        --------
        >>> import pargraph
        >>> round(pargraph.tensor([180.0]).deg2rad().item(), 4)
        3.1416
        """
        return self * (math.pi / 180.0)

    def rad2deg(self) -> Any:
        """Radians to degrees.

        Examples
        --------
        >>> import pargraph
        >>> round(pargraph.tensor([3.14159265]).rad2deg().item(), 3)
        180.0
        """
        return self * (180.0 / math.pi)

    def frac(self) -> Any:
        """The fractional part, with the sign of the input (``self - trunc(self)``).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1.5, -2.25]).frac().tolist()
        [0.5, -0.25]
        """
        if self.dtype.kind in "biu":
            raise NotImplementedError(f'"frac_cpu" not implemented for '
                                      f"'{ops.torch_name(self.dtype)}'")
        return self - self.trunc()

    def logit(self, eps: float | None = None) -> Any:
        """log(p / (1 - p)); with ``eps``, p clamped to [eps, 1 - eps] first.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([0.5]).logit().tolist()
        [0.0]
        """
        p = self if ops.is_floating(self.dtype) else self.float()  # integers as PyTorch's
        p = p if eps is None else p.clamp(eps, 1 - eps)
        return (p / (1 - p)).log()

    def float_power(self, exponent: Any) -> Any:
        """The power in float64 (as PyTorch computes it).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([2]).float_power(3)
        tensor([8.], dtype=pargraph.float64)
        """
        base = self.double()
        if hasattr(exponent, "_node"):
            exponent = exponent.double()
        return base ** exponent

    def float_power_(self, exponent: Any) -> Any:
        """``float_power`` in place, into a float64 tensor only (its result is float64, which
        PyTorch casts into no other dtype).

        Examples
        --------
        >>> import pargraph
        >>> x = pargraph.tensor([0.5], dtype=pargraph.float64)
        >>> x.float_power_(2).tolist()
        [0.25]
        """
        if self.dtype != np.float64:
            raise RuntimeError(f"the base given to float_power_ has dtype "
                               f"{ops.torch_name(self.dtype)} but the operation's result "
                               "requires dtype Double")
        return self._in_place(self.float_power(exponent))

    def nan_to_num(self, nan: float = 0.0, posinf: float | None = None,
                   neginf: float | None = None) -> Any:
        """NaN, +inf and -inf replaced (by 0, the dtype's largest and its smallest finite).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([float("nan"), 1.0]).nan_to_num().tolist()
        [0.0, 1.0]
        """
        if not ops.is_floating(self.dtype):
            return self.clone()
        info = ml_dtypes.finfo(self.dtype)  # numpy's has no bfloat16
        high = float(info.max) if posinf is None else posinf
        low = float(info.min) if neginf is None else neginf
        out = self.masked_fill(self.isnan(), nan)
        out = out.masked_fill(self == float("inf"), high)
        return out.masked_fill(self == float("-inf"), low)

    def signbit(self) -> Any:
        """Whether the sign bit is set (-0.0 included).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([-0.0, 0.0, -2.0]).signbit().tolist()
        [True, False, True]
        """
        if not ops.is_floating(self.dtype):
            return self < 0
        x = self.detach()
        return x.new_ones(x.shape).copysign(x) < 0  # infinities and NaN keep their sign

    def heaviside(self, values: Any) -> Any:
        """0 where negative, 1 where positive, ``values`` where zero (no derivative: a
        backward pass through it raises, as PyTorch's).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([-1.0, 0.0, 2.0]).heaviside(pargraph.tensor(0.5)).tolist()
        [0.0, 0.5, 1.0]
        """
        return self._apply(ops.heaviside, self._node, self._operand(values))

    def cumprod(self, dim: int, dtype: Any = None) -> Any:
        """Cumulative products along ``dim`` (exact gradients with zeros in the input).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1.0, 2.0, 3.0]).cumprod(0).tolist()
        [1.0, 2.0, 6.0]
        """
        x = self if dtype is None else self.to(dtype)
        return self._apply(ops.cumprod, x._node, dim=ops.normalize_dim(dim, max(x.ndim, 1)))
