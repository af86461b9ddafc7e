"""``torch.nn.functional``'s activations: ReLU and its relatives, sigmoids, softmaxes,
shrinkages and their in-place forms."""

from __future__ import annotations

import numpy as np

from pargraph import amp, ops
from pargraph._tensor import Tensor, apply, attach_methods
from pargraph.factories import as_tensor, default_generator, drawn, zeros
from pargraph.functions import where
from pargraph.functions import where as pargraph_where


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """max(x, 0); ``inplace``: ``input`` takes the result, as in PyTorch.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.relu(pargraph.tensor([-1.0, 2.0]))
    tensor([0., 2.])
    """
    return input.relu_() if inplace else input.relu()


def relu_(input: Tensor) -> Tensor:
    """:func:`relu` in place.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> x = pargraph.tensor([-1.0, 2.0])
    >>> _ = F.relu_(x)
    >>> x.tolist()
    [0.0, 2.0]
    """
    return input.relu_()


def sigmoid(input: Tensor) -> Tensor:
    """1 / (1 + exp(-x)).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.sigmoid(pargraph.zeros(1))
    tensor([0.5000])
    """
    return input.sigmoid()


def tanh(input: Tensor) -> Tensor:
    """The hyperbolic tangent.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.tanh(pargraph.zeros(1))
    tensor([0.])
    """
    return input.tanh()


def softmax(input: Tensor, dim: int) -> Tensor:
    """exp(x) normalized along ``dim`` (computed stably).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.softmax(pargraph.zeros(2), dim=0)
    tensor([0.5000, 0.5000])
    """
    return input.softmax(dim)


def log_softmax(input: Tensor, dim: int) -> Tensor:
    """log(softmax(x)) along ``dim``, computed stably.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> round(F.log_softmax(pargraph.zeros(2), dim=0)[0].item(), 4)
    -0.6931
    """
    return input.log_softmax(dim)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """``x`` where positive, else ``negative_slope * x``.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.leaky_relu(pargraph.tensor([-2.0, 3.0]), 0.1)
    tensor([-0.2000,  3.0000])
    """
    return in_place(input, pargraph_where(input > 0, input, input * negative_slope), inplace)


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """:func:`leaky_relu` in place."""
    return leaky_relu(input, negative_slope, inplace=True)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * sigmoid(x)`` (swish).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.silu(pargraph.zeros(1))
    tensor([0.])
    """
    return in_place(input, input * input.sigmoid(), inplace)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:  # noqa: F811
    """``log(1 + exp(beta * x)) / beta``, computed stably; linear above ``threshold``.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.softplus(pargraph.zeros(1))
    tensor([0.6931])
    """
    scaled = input * beta
    # log1p(exp(-|s|)) + max(s, 0): no overflow; maximum shares its gradient at the tie s = 0,
    # where abs gives none, so the gradient there is sigmoid(0) = 0.5, as it should be.
    smooth = ((-scaled.abs()).exp().log1p() + scaled.maximum(scaled.new_zeros(()))) / beta
    return pargraph_where(scaled > threshold, input, smooth)


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


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """``x * Phi(x)``, Phi the standard normal CDF (``approximate="tanh"``: its tanh fit).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.gelu(pargraph.tensor([-1.0, 0.0, 2.0]))
    tensor([-0.1587,  0.0000,  1.9545])
    """
    if approximate not in ("none", "tanh"):
        raise RuntimeError(f"approximate argument must be either none or tanh, got "
                           f"{approximate!r}")
    return apply(ops.gelu, as_tensor(input), approximate=approximate)


attach_methods(hardshrink=hardshrink, prelu=prelu)
