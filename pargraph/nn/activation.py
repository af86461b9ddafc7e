"""Activation functions and their modules, beyond ReLU, sigmoid and tanh: PyTorch's formulas
as compositions of pargraph ops (their gradients follow), each function also a module."""

from __future__ import annotations

import numpy as np

from pargraph import amp, ops
from pargraph._tensor import Tensor
from pargraph.factories import as_tensor, default_generator, drawn, zeros
from pargraph.functions import where
from pargraph.nn import init as nn_init
from pargraph.nn.module import Module, Parameter

# --- functions --------------------------------------------------------------------------------

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def in_place(input: Tensor, result: Tensor, inplace: bool) -> Tensor:
    """``result``; with ``inplace`` (PyTorch's ``inplace=True``), ``input`` takes ``result``'s
    value in place (PyTorch's rules for in-place ops hold) and is what comes back."""
    if not inplace or result is input:
        return result
    if not isinstance(input, Tensor):
        raise TypeError(f"inplace=True needs a tensor, not a {type(input).__name__}")
    return input._in_place(result)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``x`` where positive, else ``alpha * (exp(x) - 1)``.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.elu(pargraph.tensor([-1.0, 2.0])).tolist()
    [-0.6321206092834473, 2.0]
    """
    x = as_tensor(input)
    return in_place(input, where(x > 0, x, (x.clamp(max=0.0).exp() - 1) * alpha), inplace)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """``scale * elu(x, alpha)`` with the self-normalizing constants.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> round(F.selu(pargraph.tensor([1.0])).item(), 4)
    1.0507
    """
    return in_place(input, elu(input, _SELU_ALPHA) * _SELU_SCALE, inplace)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.celu(pargraph.tensor([0.0, 3.0])).tolist()
    [0.0, 3.0]
    """
    x = as_tensor(input)
    return in_place(input, where(x > 0, x, ((x.clamp(max=0.0) / alpha).exp() - 1) * alpha),
                    inplace)


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """The first half of ``input`` along ``dim`` gated by the sigmoid of the second.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.glu(pargraph.tensor([2.0, 0.0])).tolist()
    [1.0]
    """
    x = as_tensor(input)
    if x.shape[dim] % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {dim} is size "
                           f"{x.shape[dim]}")
    a, b = x.chunk(2, dim)
    return a * b.sigmoid()


def logsigmoid(input: Tensor) -> Tensor:
    """``log(sigmoid(x))``, computed stably as ``min(x, 0) - log1p(exp(-|x|))``; the
    ``min`` splits its gradient at 0 as PyTorch's does at a tie, which makes the gradient
    there ``sigmoid(0)``, as PyTorch's (a ``clamp`` would pass all of it: 1).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> round(F.logsigmoid(pargraph.tensor([0.0])).item(), 4)
    -0.6931
    """
    x = as_tensor(input)
    return x.minimum(x.new_zeros(())) - (-x.abs()).exp().log1p()


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * tanh(softplus(x))``.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> round(F.mish(pargraph.tensor([1.0])).item(), 4)
    0.8651
    """
    x = as_tensor(input)
    softplus = where(x > 20.0, x, x.clamp(max=20.0).exp().log1p())  # PyTorch's threshold
    return in_place(input, x * softplus.tanh(), inplace)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0,
             inplace: bool = False) -> Tensor:
    """``x`` clamped to ``[min_val, max_val]``.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.hardtanh(pargraph.tensor([-3.0, 0.5, 3.0])).tolist()
    [-1.0, 0.5, 1.0]
    """
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return in_place(input, _clamped(as_tensor(input), min_val, max_val), inplace)


def _clamped(x: Tensor, low: float, high: float) -> Tensor:
    """``x.clamp(low, high)``, whose gradient is zero at the bounds too, as in PyTorch's
    hardtanh, hardsigmoid and hardswish (``clamp``'s own passes it there)."""
    return where((x > low) & (x < high), x, x.clamp(low, high).detach())


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """``min(max(0, x), 6)``.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.relu6(pargraph.tensor([-1.0, 8.0])).tolist()
    [0.0, 6.0]
    """
    return hardtanh(input, 0.0, 6.0, inplace)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """``relu6(x + 3) / 6``.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.hardsigmoid(pargraph.tensor([0.0])).tolist()
    [0.5]
    """
    return in_place(input, _clamped(as_tensor(input) + 3.0, 0.0, 6.0) / 6.0, inplace)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * relu6(x + 3) / 6``.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.hardswish(pargraph.tensor([1.0])).tolist()
    [0.6666666865348816]
    """
    x = as_tensor(input)
    if x.dtype in ops.HALVES:  # in float32, rounded once, as PyTorch (x * 6 would overflow)
        return in_place(input, hardswish(x.float()).to(x.dtype), inplace)
    return in_place(input, x * _clamped(x + 3.0, 0.0, 6.0) / 6.0, inplace)


def softsign(input: Tensor) -> Tensor:
    """``x / (1 + |x|)``.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.softsign(pargraph.tensor([1.0])).tolist()
    [0.5]
    """
    x = as_tensor(input)
    return x / (x.abs() + 1.0)


def softmin(input: Tensor, dim: int | None = None, dtype=None) -> Tensor:
    """``softmax(-x)`` along ``dim``.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.softmin(pargraph.tensor([0.0, 0.0]), dim=0).tolist()
    [0.5, 0.5]
    """
    x = as_tensor(input)
    if dtype is not None:
        x = x.to(dtype)
    return (-x).softmax(-1 if dim is None else dim)


def tanhshrink(input: Tensor) -> Tensor:
    """``x - tanh(x)``.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.tanhshrink(pargraph.tensor([0.0])).tolist()
    [0.0]
    """
    x = as_tensor(input)
    return x - x.tanh()


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, else 0.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.softshrink(pargraph.tensor([-2.0, 0.1, 2.0])).tolist()
    [-1.5, 0.0, 1.5]
    """
    x = as_tensor(input)
    return where(x > lambd, x - lambd, where(x < -lambd, x + lambd, x * 0.0))


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``x`` where ``|x| > lambd``, else 0.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.hardshrink(pargraph.tensor([-2.0, 0.1])).tolist()
    [-2.0, 0.0]
    """
    x = as_tensor(input)
    if not ops.is_floating(x.dtype):
        raise NotImplementedError(f'"hardshrink_cpu" not implemented for '
                                  f"'{ops.torch_name(x.dtype)}'")
    return where((x > lambd) | (x < -lambd), x, x * 0.0)


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """``x`` where ``x > threshold``, else ``value``.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.threshold(pargraph.tensor([0.5, 2.0]), 1.0, -1.0).tolist()
    [-1.0, 2.0]
    """
    x = as_tensor(input)
    return in_place(input, where(x > threshold, x, x * 0.0 + value), inplace)


_threshold = threshold  # for threshold_, whose argument of that name hides the function


@amp.autocasts("lower")
def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """``x`` where positive, else ``weight * x`` (``weight`` per channel, dimension 1).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.prelu(pargraph.tensor([[-2.0, 1.0]]), pargraph.tensor([0.25])).tolist()
    [[-0.5, 1.0]]
    """
    x, w = as_tensor(input), as_tensor(weight)
    if w.numel() != 1:
        if x.dim() < 2 or x.shape[1] != w.numel():
            raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found "
                               f"parameter numbers = {w.numel()} and channel size = "
                               f"{x.shape[1] if x.dim() > 1 else 1}.")
        w = w.reshape((1, -1) + (1,) * (x.dim() - 2))
    return where(x > 0, x, x * w)


def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
          training: bool = False, inplace: bool = False) -> Tensor:
    """Leaky ReLU whose negative slope is drawn uniformly from ``[lower, upper]`` per element
    in training, and is their mean otherwise.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.rrelu(pargraph.tensor([-3.0, 1.0]), 0.1, 0.3).tolist()
    [-0.6000000238418579, 1.0]
    """
    x = as_tensor(input)
    if not training:
        return in_place(input, where(x > 0, x, x * ((lower + upper) / 2)), inplace)
    shape, dtype = tuple(x.shape), x.dtype
    slope = drawn(lambda: default_generator().uniform(lower, upper, shape).astype(dtype))
    return in_place(input, where(x > 0, x, x * slope), inplace)


def gumbel_softmax(logits: Tensor, tau: float = 1.0, hard: bool = False, eps: float = 1e-10,
                   dim: int = -1) -> Tensor:
    """A sample of the Gumbel-softmax distribution: ``softmax((logits + g) / tau)`` with ``g``
    Gumbel noise; ``hard``: the one-hot of its argmax, with the soft sample's gradient
    (straight-through).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> sample = F.gumbel_softmax(pargraph.zeros(2, 3), hard=True)
    >>> sample.sum(-1).tolist()
    [1.0, 1.0]
    """
    logits = as_tensor(logits)
    shape, dtype = tuple(logits.shape), logits.dtype
    gumbels = drawn(lambda: -np.log(default_generator().exponential(1.0, shape)).astype(dtype))
    soft = ((logits + gumbels) / tau).softmax(dim)
    if not hard:
        return soft
    index = soft.argmax(dim, keepdim=True)
    one_hot = zeros(shape, dtype=dtype).scatter(dim, index, 1.0)
    return one_hot - soft.detach() + soft


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """:func:`elu` in place."""
    return elu(input, alpha, inplace=True)


def selu_(input: Tensor) -> Tensor:
    """:func:`selu` in place."""
    return selu(input, inplace=True)


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """:func:`celu` in place."""
    return celu(input, alpha, inplace=True)


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """:func:`hardtanh` in place.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> x = pargraph.tensor([-3.0, 3.0])
    >>> _ = F.hardtanh_(x)
    >>> x.tolist()
    [-1.0, 1.0]
    """
    return hardtanh(input, min_val, max_val, inplace=True)


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    """:func:`threshold` in place."""
    return _threshold(input, threshold, value, inplace=True)


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
           training: bool = False) -> Tensor:
    """:func:`rrelu` in place."""
    return rrelu(input, lower, upper, training, inplace=True)


# --- modules ----------------------------------------------------------------------------------


class _Elementwise(Module):
    """An activation module that calls its function with its arguments."""

    function = staticmethod(elu)
    arguments: tuple[str, ...] = ()
    #: PyTorch's ``inplace``, for the functions that take it (None: the function has none).
    inplace: bool | None = None

    def forward(self, input: Tensor) -> Tensor:
        arguments = (getattr(self, a) for a in self.arguments)
        if self.inplace is None:
            return type(self).function(input, *arguments)
        return type(self).function(input, *arguments, inplace=self.inplace)

    def extra_repr(self) -> str:
        return ", ".join([f"{a}={getattr(self, a)}" for a in self.arguments]
                         + (["inplace=True"] if self.inplace else []))


class ELU(_Elementwise):
    """:func:`elu` as a module.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.ELU()(pargraph.tensor([2.0])).tolist()
    [2.0]
    """

    function, arguments = staticmethod(elu), ("alpha",)

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace
        self.alpha = alpha


class CELU(_Elementwise):
    """:func:`celu` as a module.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.CELU()(pargraph.tensor([2.0])).tolist()
    [2.0]
    """

    function, arguments = staticmethod(celu), ("alpha",)

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace
        self.alpha = alpha


class SELU(_Elementwise):
    """:func:`selu` as a module.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.SELU()(pargraph.tensor([0.0])).tolist()
    [0.0]
    """

    function = staticmethod(selu)

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace


class GLU(_Elementwise):
    """:func:`glu` as a module.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.GLU()(pargraph.tensor([2.0, 0.0])).tolist()
    [1.0]
    """

    function, arguments = staticmethod(glu), ("dim",)

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim


class LogSigmoid(_Elementwise):
    """:func:`logsigmoid` as a module.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.LogSigmoid()(pargraph.tensor([0.0])).tolist()
    [-0.6931471824645996]
    """

    function = staticmethod(logsigmoid)


class Mish(_Elementwise):
    """:func:`mish` as a module.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Mish()(pargraph.tensor([0.0])).tolist()
    [0.0]
    """

    function = staticmethod(mish)

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace


class Hardsigmoid(_Elementwise):
    """:func:`hardsigmoid` as a module.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Hardsigmoid()(pargraph.tensor([3.0])).tolist()
    [1.0]
    """

    function = staticmethod(hardsigmoid)

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def extra_repr(self) -> str:
        return ""  # PyTorch's shows no inplace for this one


class Hardswish(_Elementwise):
    """:func:`hardswish` as a module.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Hardswish()(pargraph.tensor([3.0])).tolist()
    [3.0]
    """

    function = staticmethod(hardswish)

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def extra_repr(self) -> str:
        return ""  # PyTorch's shows no inplace for this one


class ReLU6(_Elementwise):
    """:func:`relu6` as a module.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.ReLU6()(pargraph.tensor([7.0])).tolist()
    [6.0]
    """

    function = staticmethod(relu6)

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace


class Softsign(_Elementwise):
    """:func:`softsign` as a module.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Softsign()(pargraph.tensor([3.0])).tolist()
    [0.75]
    """

    function = staticmethod(softsign)


class Tanhshrink(_Elementwise):
    """:func:`tanhshrink` as a module.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Tanhshrink()(pargraph.tensor([0.0])).tolist()
    [0.0]
    """

    function = staticmethod(tanhshrink)


class Hardtanh(_Elementwise):
    """:func:`hardtanh` as a module.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Hardtanh(-2.0, 2.0)(pargraph.tensor([5.0])).tolist()
    [2.0]
    """

    function, arguments = staticmethod(hardtanh), ("min_val", "max_val")

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0,
                 inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace
        if min_val > max_val:
            raise ValueError("min_val cannot be greater than max_val")
        self.min_val, self.max_val = min_val, max_val


class Softmin(_Elementwise):
    """:func:`softmin` as a module.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Softmin(dim=0)(pargraph.tensor([1.0, 1.0])).tolist()
    [0.5, 0.5]
    """

    function, arguments = staticmethod(softmin), ("dim",)

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim


class Softshrink(_Elementwise):
    """:func:`softshrink` as a module.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Softshrink(1.0)(pargraph.tensor([3.0])).tolist()
    [2.0]
    """

    function, arguments = staticmethod(softshrink), ("lambd",)

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd


class Hardshrink(_Elementwise):
    """:func:`hardshrink` as a module.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Hardshrink(1.0)(pargraph.tensor([0.5, 3.0])).tolist()
    [0.0, 3.0]
    """

    function, arguments = staticmethod(hardshrink), ("lambd",)

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd


class Threshold(_Elementwise):
    """:func:`threshold` as a module.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Threshold(1.0, 0.0)(pargraph.tensor([0.5, 3.0])).tolist()
    [0.0, 3.0]
    """

    function, arguments = staticmethod(threshold), ("threshold", "value")

    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace
        self.threshold, self.value = threshold, value


class RReLU(Module):
    """:func:`rrelu` as a module: random slopes in training, their mean in eval.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.RReLU(0.1, 0.3).eval()(pargraph.tensor([-1.0])).tolist()
    [-0.20000000298023224]
    """

    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
                 inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace
        self.lower, self.upper = lower, upper

    def forward(self, input: Tensor) -> Tensor:
        return rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace
                                                             else "")


class PReLU(Module):
    """:func:`prelu` with a learned slope: one, or one per channel (``num_parameters``).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.PReLU()(pargraph.tensor([-4.0])).tolist()
    [-1.0]
    """

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.num_parameters, self.init = num_parameters, init
        self.weight = Parameter(zeros(num_parameters))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn_init.constant_(self.weight, self.init)

    def forward(self, input: Tensor) -> Tensor:
        return prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"
