"""``pargraph.nn.init``: fill parameters in place, from the generator ``manual_seed`` seeds."""

from __future__ import annotations

import math

import numpy as np

from pargraph._tensor import Tensor
from pargraph.factories import default_generator
from pargraph.nn.module import assign


def _fans(t: Tensor) -> tuple[int, int]:
    if t.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 "
                         "dimensions")
    receptive = int(np.prod(t.shape[2:])) if t.ndim > 2 else 1
    return t.shape[1] * receptive, t.shape[0] * receptive


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for a nonlinearity, as in PyTorch.

    Examples
    --------
    >>> from pargraph.nn import init
    >>> round(init.calculate_gain("relu"), 4)
    1.4142
    """
    if nonlinearity in LINEAR or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, float) or (isinstance(param, int) and
                                          not isinstance(param, bool)):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4  # PyTorch's, found empirically
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


#: The ops ``calculate_gain`` gives a gain of 1, as PyTorch's.
LINEAR = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
          "conv_transpose3d")


def zeros_(t: Tensor) -> Tensor:
    """Fill with zeros.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import init
    >>> init.zeros_(pargraph.ones(2)).tolist()
    [0.0, 0.0]
    """
    assign(t, np.zeros(t.shape))
    return t


def ones_(t: Tensor) -> Tensor:
    """Fill with ones.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import init
    >>> init.ones_(pargraph.zeros(2)).tolist()
    [1.0, 1.0]
    """
    assign(t, np.ones(t.shape))
    return t


def constant_(t: Tensor, val: float) -> Tensor:
    """Fill with ``val``.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import init
    >>> init.constant_(pargraph.zeros(2), 0.5).tolist()
    [0.5, 0.5]
    """
    assign(t, np.full(t.shape, val))
    return t


def normal_(t: Tensor, mean: float = 0.0, std: float = 1.0) -> Tensor:
    """Fill with samples of N(mean, std²).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import init
    >>> init.normal_(pargraph.zeros(3), std=0.0).tolist()
    [0.0, 0.0, 0.0]
    """
    assign(t, default_generator().normal(mean, std, t.shape))
    return t


def uniform_(t: Tensor, a: float = 0.0, b: float = 1.0) -> Tensor:
    """Fill with samples of U(a, b).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import init
    >>> bool((init.uniform_(pargraph.zeros(100), -1, 1).abs() <= 1).all())
    True
    """
    assign(t, default_generator().uniform(a, b, t.shape))
    return t


def xavier_uniform_(t: Tensor, gain: float = 1.0) -> Tensor:
    """Glorot initialization: U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import init
    >>> init.xavier_uniform_(pargraph.zeros(3, 5)).shape
    pargraph.Size([3, 5])
    """
    fan_in, fan_out = _fans(t)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(t, -bound, bound)


def kaiming_uniform_(t: Tensor, a: float = 0.0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu") -> Tensor:
    """He initialization: U(-b, b) with b = gain * sqrt(3 / fan), as in PyTorch.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import init
    >>> init.kaiming_uniform_(pargraph.zeros(4, 9)).abs().max().item() <= (6 / 9) ** 0.5
    True
    """
    fan_in, fan_out = _fans(t)
    fan = fan_in if mode == "fan_in" else fan_out
    bound = calculate_gain(nonlinearity, a) * math.sqrt(3.0 / fan)
    return uniform_(t, -bound, bound)


def xavier_normal_(t: Tensor, gain: float = 1.0) -> Tensor:
    """Glorot initialization: N(0, std) with std = gain * sqrt(2 / (fan_in + fan_out)).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import init
    >>> init.xavier_normal_(pargraph.zeros(3, 5)).shape
    pargraph.Size([3, 5])
    """
    fan_in, fan_out = _fans(t)
    return normal_(t, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)))


def kaiming_normal_(t: Tensor, a: float = 0.0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu") -> Tensor:
    """He initialization: N(0, std) with std = gain / sqrt(fan), as in PyTorch.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import init
    >>> init.kaiming_normal_(pargraph.zeros(4, 9), nonlinearity="relu").shape
    pargraph.Size([4, 9])
    """
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _fans(t)
    fan = fan_in if mode == "fan_in" else fan_out
    return normal_(t, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(fan))


def trunc_normal_(t: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0,
                  b: float = 2.0) -> Tensor:
    """Fill with samples of N(mean, std²) truncated to [a, b] (bounds in the values' units,
    as PyTorch's): the inverse of the normal CDF at uniform draws between the bounds' CDFs.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import init
    >>> bool((init.trunc_normal_(pargraph.zeros(1000), std=1.0, a=-0.5, b=0.5).abs() <= 0.5)
    ...      .all())
    True
    """
    from scipy import special

    low = special.ndtr((a - mean) / std)
    high = special.ndtr((b - mean) / std)
    draws = default_generator().uniform(low, high, t.shape)
    values = special.ndtri(draws) * std + mean
    assign(t, np.clip(values, a, b))
    return t


def orthogonal_(t: Tensor, gain: float = 1.0) -> Tensor:
    """Fill with a (semi-)orthogonal matrix (trailing dimensions flattened), times ``gain``:
    the Q of a normal matrix's QR factorization, its signs fixed by R's diagonal.

    Examples
    --------
    >>> import numpy as np, pargraph; from pargraph.nn import init
    >>> q = init.orthogonal_(pargraph.zeros(3, 3)).numpy()
    >>> bool(np.allclose(q @ q.T, np.eye(3), atol=1e-6))
    True
    """
    if t.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if t.numel() == 0:
        return t
    rows = t.shape[0]
    cols = t.numel() // rows
    flat = default_generator().normal(0.0, 1.0, (rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diagonal(r))
    if rows < cols:
        q = q.T
    assign(t, (q * gain).reshape(t.shape))
    return t


def sparse_(t: Tensor, sparsity: float, std: float = 0.01) -> Tensor:
    """Fill a 2-D tensor with N(0, std²) values, ``sparsity`` of each column's entries zero.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import init
    >>> w = init.sparse_(pargraph.zeros(10, 4), sparsity=0.3)
    >>> [(w[:, k] == 0).sum().item() for k in range(4)]
    [3, 3, 3, 3]
    """
    if t.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = t.shape
    zeros_per_column = int(math.ceil(sparsity * rows))
    generator = default_generator()
    values = generator.normal(0.0, std, (rows, cols))
    for column in range(cols):
        values[generator.permutation(rows)[:zeros_per_column], column] = 0.0
    assign(t, values)
    return t


def eye_(t: Tensor) -> Tensor:
    """Fill a 2-D tensor with the identity matrix.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import init
    >>> init.eye_(pargraph.zeros(2, 3)).tolist()
    [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    """
    if t.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    assign(t, np.eye(*t.shape))
    return t


def dirac_(t: Tensor, groups: int = 1) -> Tensor:
    """Fill a 3-, 4- or 5-D convolution weight with the Dirac delta: each of the first input
    channels passes through to its output channel unchanged (per group).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import init
    >>> init.dirac_(pargraph.zeros(2, 2, 3))[:, :, 1].tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    if t.ndim not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = t.shape
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    per_group = sizes[0] // groups
    value = np.zeros(sizes)
    center = tuple(size // 2 for size in sizes[2:])
    for g in range(groups):
        for d in range(min(per_group, sizes[1])):
            value[(g * per_group + d, d, *center)] = 1
    assign(t, value)
    return t
