"""Factories: new tensors from data (``tensor``, ``as_tensor``, ``from_numpy``), filled or
ranged (``zeros``, ``arange``, ...) and random (``rand``, ``randn``, ``randint``), with
pargraph's random number generator (``manual_seed``, ``initial_seed``, ``get_rng_state``).

Python floats become float32 and Python ints int64, as in PyTorch; numpy arrays keep their
dtype. Every factory takes ``device=`` (the CPU, or a clear error).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np

from pargraph import ops
from pargraph._tensor import Tensor, apply, drawn, int64
from pargraph.devices import check_device
from pargraph.graph import user_stacklevel
from pargraph.leaves import leaf_of, scalar
from pargraph.methods.shapes import shape_arg
from pargraph.ops import defaults
from pargraph.ops.core import fresh_seed


def manual_seed(seed: int) -> np.random.Generator:
    """Seed pargraph's random number generator (``rand``, ``randn``, dropout, shuffling).

    Examples
    --------
    >>> import pargraph
    >>> _ = pargraph.manual_seed(0); a = pargraph.rand(2)
    >>> _ = pargraph.manual_seed(0); bool((a == pargraph.rand(2)).all())
    True
    """
    return defaults.reseed(seed)


def initial_seed() -> int:
    """The seed pargraph's generator started from: the last ``manual_seed``'s (in a
    ``DataLoader`` worker, the worker's), else one drawn when the process started.

    Examples
    --------
    >>> import pargraph
    >>> _ = pargraph.manual_seed(7); pargraph.initial_seed()
    7
    """
    return defaults.seed


def seed() -> int:
    """Seed pargraph's generator with a random number, and return it.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.seed() == pargraph.initial_seed()
    True
    """
    manual_seed(fresh_seed())
    return defaults.seed


#: A generator state as bytes: PCG64's 128-bit state and increment, and its buffered half word.
_STATE_BYTES = 16 + 16 + 1 + 4


def get_rng_state() -> Tensor:
    """The generator's state, as a ``uint8`` tensor (``torch.get_rng_state``) that
    :func:`set_rng_state` puts back and ``pargraph.save`` keeps.

    Examples
    --------
    >>> import pargraph
    >>> state = pargraph.get_rng_state(); a = pargraph.rand(2)
    >>> pargraph.set_rng_state(state); bool((pargraph.rand(2) == a).all())
    True
    """
    return _state_of(defaults.generator)


def _state_of(generator: np.random.Generator) -> Tensor:
    """A numpy generator's state as a ``uint8`` tensor (its PCG64 words)."""
    state = generator.bit_generator.state
    packed = (state["state"]["state"].to_bytes(16, "little")
              + state["state"]["inc"].to_bytes(16, "little")
              + bytes([state["has_uint32"]]) + state["uinteger"].to_bytes(4, "little"))
    return tensor(np.frombuffer(packed, dtype=np.uint8).copy())


def set_rng_state(new_state: Tensor) -> None:
    """Put back a state :func:`get_rng_state` gave (``torch.set_rng_state``); the draws
    that followed it follow again.

    Examples
    --------
    >>> import pargraph
    >>> state = pargraph.get_rng_state()
    >>> pargraph.set_rng_state(state)
    """
    _restore_state(defaults.generator, new_state)


def _restore_state(generator: np.random.Generator, new_state: Tensor) -> None:
    """Put a state :func:`_state_of` gave back into ``generator``."""
    if not isinstance(new_state, Tensor):
        raise TypeError(f"expected a torch.ByteTensor, but got {type(new_state).__name__}")
    if new_state.dtype != np.uint8:
        raise TypeError("RNG state must be a torch.ByteTensor")
    packed = np.ascontiguousarray(new_state.detach().numpy()).reshape(-1).tobytes()
    if len(packed) != _STATE_BYTES:
        raise RuntimeError(f"Expected a CPUGeneratorImplState of size {_STATE_BYTES} but found "
                           f"the input RNG state size to be {len(packed)}")
    if packed[32] > 1:
        raise RuntimeError("set_rng_state: not a state get_rng_state gave (its buffered-word "
                           f"flag is {packed[32]}, not 0 or 1)")
    generator.bit_generator.state = {
        "bit_generator": "PCG64",
        "state": {"state": int.from_bytes(packed[:16], "little"),
                  "inc": int.from_bytes(packed[16:32], "little")},
        "has_uint32": packed[32], "uinteger": int.from_bytes(packed[33:], "little")}


def default_generator() -> np.random.Generator:
    """The generator ``manual_seed`` seeded (``ops.defaults.generator``)."""
    return defaults.generator


def tensor(data: Any, dtype=None, requires_grad: bool = False,
           device: Any = None) -> Tensor:
    """A new leaf tensor holding a copy of ``data``.

    Python floats become float32 and Python ints int64, as in PyTorch; numpy arrays keep
    their dtype.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.tensor([[1.0, 2.0]]).dtype
    pargraph.float32
    """
    check_device(device, "tensor")
    if isinstance(data, Tensor):
        warnings.warn("To copy construct from a tensor, it is recommended to use "
                      "sourceTensor.detach().clone() or "
                      "sourceTensor.detach().clone().requires_grad_(True), rather than "
                      "torch.tensor(sourceTensor).", UserWarning, stacklevel=user_stacklevel())
    t = Tensor(leaf_of(data, dtype))
    if requires_grad:
        t.requires_grad_(True)
    return t


def as_tensor(data: Any, dtype=None, device: Any = None) -> Tensor:
    """``data`` as a tensor, without copying a Tensor that already has the dtype.

    Examples
    --------
    >>> import pargraph
    >>> t = pargraph.ones(2); pargraph.as_tensor(t) is t
    True
    """
    check_device(device, "as_tensor")
    if isinstance(data, Tensor):
        return data if dtype is None or data.dtype == np.dtype(dtype) else data.to(dtype)
    return tensor(data, dtype=dtype)


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing memory with ``array`` (its dtype is kept).

    Examples
    --------
    >>> import numpy as np, pargraph
    >>> pargraph.from_numpy(np.arange(3.0)).dtype
    pargraph.float64
    """
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy: expected np.ndarray (got {type(array).__name__})")
    return _leaf(array, False)


def empty_for_init(*size: int) -> Tensor:
    """An uninitialized float32 tensor, for layers that initialize their parameters next."""
    return _leaf(np.empty(size, dtype=defaults.float), False)


def _leaf(array: np.ndarray, requires_grad: bool) -> Tensor:
    t = apply(ops.constant, array)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _filled(shape: tuple, fill: Any, dtype, requires_grad: bool) -> Tensor:
    dtype = np.dtype(dtype) if dtype is not None else defaults.float
    ops.check_fits(fill, dtype)
    return _leaf(np.full(shape_arg(shape), fill, dtype=dtype), requires_grad)


def zeros(*size, dtype=None, requires_grad: bool = False,
          device: Any = None, **given: Any) -> Tensor:
    """A tensor of zeros (float32 by default).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.zeros(2, 3).shape
    pargraph.Size([2, 3])
    """
    if given:
        size = ops.keyword_sizes(given, "size", size, "zeros")
    check_device(device, "zeros")
    return _filled(size, 0, dtype, requires_grad)


def empty(*size, dtype=None, requires_grad: bool = False, device: Any = None,
          **given: Any) -> Tensor:
    """A tensor whose values are not to be read before they are written (zeros here), as
    PyTorch's ``empty``: what a custom op's ``register_fake`` returns for its output.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.empty(2, 3).shape
    pargraph.Size([2, 3])
    """
    if given:
        size = ops.keyword_sizes(given, "size", size, "empty")
    check_device(device, "empty")
    return _filled(size, 0, dtype, requires_grad)


def empty_like(t: Tensor, dtype=None, requires_grad: bool = False,
               device: Any = None,
               layout: Any = None, memory_format: Any = None) -> Tensor:
    """``empty`` with the shape (and by default the dtype) of ``t``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.empty_like(pargraph.ones(4, dtype=pargraph.float64)).dtype
    pargraph.float64
    """
    check_device(device, "empty_like")
    return _filled(t.shape, 0, dtype or t.dtype, requires_grad)


def ones(*size, dtype=None, requires_grad: bool = False,
         device: Any = None, **given: Any) -> Tensor:
    """A tensor of ones (float32 by default).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.ones(2)
    tensor([1., 1.])
    """
    if given:
        size = ops.keyword_sizes(given, "size", size, "ones")
    check_device(device, "ones")
    return _filled(size, 1, dtype, requires_grad)


def full(size, fill_value, dtype=None, requires_grad: bool = False,
         device: Any = None) -> Tensor:
    """A tensor filled with ``fill_value``; the dtype follows the value, as in PyTorch.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.full((2,), 7).dtype
    pargraph.int64
    """
    check_device(device, "full")
    if dtype is None:
        dtype = ops.scalar_dtype(scalar(fill_value))
    return _filled((size,) if isinstance(size, int) else tuple(size), fill_value, dtype,
                   requires_grad)


def zeros_like(t: Tensor, dtype=None, requires_grad: bool = False,
               device: Any = None,
               layout: Any = None, memory_format: Any = None) -> Tensor:
    """Zeros with the shape (and by default the dtype) of ``t``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.zeros_like(pargraph.ones(2, dtype=pargraph.int64)).dtype
    pargraph.int64
    """
    check_device(device, "zeros_like")
    return _filled(t.shape, 0, dtype or t.dtype, requires_grad)


def ones_like(t: Tensor, dtype=None, requires_grad: bool = False,
              device: Any = None,
              layout: Any = None, memory_format: Any = None) -> Tensor:
    """Ones with the shape (and by default the dtype) of ``t``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.ones_like(pargraph.zeros(3)).tolist()
    [1.0, 1.0, 1.0]
    """
    check_device(device, "ones_like")
    return _filled(t.shape, 1, dtype or t.dtype, requires_grad)


def full_like(t: Tensor, fill_value, dtype=None, requires_grad: bool = False,
              device: Any = None,
              layout: Any = None, memory_format: Any = None) -> Tensor:
    """``fill_value`` with the shape (and by default the dtype) of ``t``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.full_like(pargraph.zeros(2), 4.5).tolist()
    [4.5, 4.5]
    """
    check_device(device, "full_like")
    return _filled(t.shape, fill_value, dtype or t.dtype, requires_grad)


def arange(start, end=None, step=1, dtype=None, requires_grad: bool = False,
           device: Any = None) -> Tensor:
    """Values from ``start`` to ``end`` (exclusive); int64 if all arguments are ints.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.arange(0, 1, 0.25).tolist()
    [0.0, 0.25, 0.5, 0.75]
    """
    check_device(device, "arange")
    if end is None:
        start, end = 0, start
    # A 0-d tensor counts as its number: an integer one keeps the result integral.
    start, end, step = (v.item() if isinstance(v, Tensor) else v for v in (start, end, step))
    if dtype is None:
        is_int = all(isinstance(v, (int, np.integer)) for v in (start, end, step))
        dtype = int64 if is_int else defaults.float
    _not_for_bool(dtype, "arange")
    if np.dtype(dtype) == np.int64 and int(step) == 0 or step == 0:
        raise ValueError("step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError(f"arange: upper bound and lower bound inconsistent with step sign "
                           f"(start {start}, end {end}, step {step})")
    if np.dtype(dtype).kind in "iu":  # bounds past int64 raise; a narrower dtype wraps
        for bound in (start, end):
            ops.check_fits(bound, np.dtype(np.int64))
    values = np.arange(start, end, step)
    if np.dtype(dtype).kind in "iu" and values.dtype.kind == "f":
        values = values.astype(np.int64)  # truncated, then wrapped as PyTorch's
    return _leaf(values.astype(dtype), requires_grad)


def _not_for_bool(dtype: Any, name: str) -> None:
    if dtype is not None and np.dtype(dtype) == np.bool_:
        raise NotImplementedError(f'"{name}_cpu" not implemented for \'Bool\'')


def linspace(start, end, steps: int, dtype=None, requires_grad: bool = False,
             device: Any = None) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` (inclusive).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.linspace(0, 1, 3).tolist()
    [0.0, 0.5, 1.0]
    """
    check_device(device, "linspace")
    _not_for_bool(dtype, "linspace")
    return _leaf(np.linspace(start, end, steps).astype(dtype or defaults.float), requires_grad)


def logspace(start, end, steps: int, base: float = 10.0, dtype=None,
             requires_grad: bool = False, device: Any = None) -> Tensor:
    """``steps`` values from ``base ** start`` to ``base ** end``, evenly spaced in their
    exponents, as ``torch.logspace``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.logspace(0, 2, 3).tolist()
    [1.0, 10.0, 100.0]
    """
    check_device(device, "logspace")
    _not_for_bool(dtype, "logspace")
    return _leaf(np.logspace(start, end, steps, base=base).astype(dtype or defaults.float),
                 requires_grad)


def eye(n: int, m: int | None = None, dtype=None, requires_grad: bool = False,
        device: Any = None) -> Tensor:
    """The identity matrix.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.eye(2).tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    check_device(device, "eye")
    return _leaf(np.eye(n, m, dtype=dtype or defaults.float), requires_grad)


def _window(name: str, length: int, periodic: bool, dtype: Any, requires_grad: bool,
            shape: Callable[[np.ndarray], np.ndarray]) -> Tensor:
    """A window of ``length`` points: ``shape`` of the positions ``2 n / (N - 1) - 1`` in
    [-1, 1] of a symmetric window of N points (``periodic``: N = length + 1, the last point
    dropped), as PyTorch's window functions."""
    if not isinstance(length, int) or length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got window_length="
                           f"{length}")
    dtype = np.dtype(dtype or defaults.float)
    if length <= 1:
        return _leaf(np.ones(length, dtype), requires_grad)
    points = length + 1 if periodic else length
    position = 2 * np.arange(points, dtype=np.float64) / (points - 1) - 1
    return _leaf(shape(position)[:length].astype(dtype), requires_grad)


def hann_window(window_length: int, periodic: bool = True, *, dtype=None,
                requires_grad: bool = False, device: Any = None, **_: Any) -> Tensor:
    """The Hann window, ``0.5 - 0.5 cos(2 pi n / (N - 1))``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.hann_window(4).tolist()
    [0.0, 0.5, 1.0, 0.5]
    """
    check_device(device, "hann_window")
    return _window("hann_window", window_length, periodic, dtype, requires_grad,
                   lambda t: 0.5 - 0.5 * np.cos(np.pi * (t + 1)))


def hamming_window(window_length: int, periodic: bool = True, alpha: float = 0.54,
                   beta: float = 0.46, *, dtype=None, requires_grad: bool = False,
                   device: Any = None, **_: Any) -> Tensor:
    """The generalized Hamming window, ``alpha - beta cos(2 pi n / (N - 1))``.

    Examples
    --------
    >>> import pargraph
    >>> [round(v, 2) for v in pargraph.hamming_window(4).tolist()]
    [0.08, 0.54, 1.0, 0.54]
    """
    check_device(device, "hamming_window")
    return _window("hamming_window", window_length, periodic, dtype, requires_grad,
                   lambda t: alpha - beta * np.cos(np.pi * (t + 1)))


def bartlett_window(window_length: int, periodic: bool = True, *, dtype=None,
                    requires_grad: bool = False, device: Any = None, **_: Any) -> Tensor:
    """The Bartlett (triangular) window, ``1 - |2 n / (N - 1) - 1|``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.bartlett_window(4).tolist()
    [0.0, 0.5, 1.0, 0.5]
    """
    check_device(device, "bartlett_window")
    return _window("bartlett_window", window_length, periodic, dtype, requires_grad,
                   lambda t: 1 - np.abs(t))


def blackman_window(window_length: int, periodic: bool = True, *, dtype=None,
                    requires_grad: bool = False, device: Any = None, **_: Any) -> Tensor:
    """The Blackman window, ``0.42 - 0.5 cos(2 pi n / (N - 1)) + 0.08 cos(4 pi n / (N - 1))``.

    Examples
    --------
    >>> import pargraph
    >>> [round(v, 2) for v in pargraph.blackman_window(4).tolist()]
    [-0.0, 0.34, 1.0, 0.34]
    """
    check_device(device, "blackman_window")
    return _window("blackman_window", window_length, periodic, dtype, requires_grad,
                   lambda t: 0.42 - 0.5 * np.cos(np.pi * (t + 1)) + 0.08 * np.cos(
                       2 * np.pi * (t + 1)))


def kaiser_window(window_length: int, periodic: bool = True, beta: float = 12.0, *,
                  dtype=None, requires_grad: bool = False, device: Any = None,
                  **_: Any) -> Tensor:
    """The Kaiser window, ``I0(beta sqrt(1 - (2 n / (N - 1) - 1)^2)) / I0(beta)``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.kaiser_window(3, periodic=False, beta=0.0).tolist()
    [1.0, 1.0, 1.0]
    """
    check_device(device, "kaiser_window")
    return _window("kaiser_window", window_length, periodic, dtype, requires_grad,
                   lambda t: np.i0(beta * np.sqrt(np.clip(1 - t * t, 0, None))) / np.i0(beta))


def tril_indices(row: int, col: int, offset: int = 0, *, dtype=None,
                 device: Any = None) -> Tensor:
    """The (row, column) indices of the lower triangle of a ``row`` x ``col`` matrix (below
    and on diagonal ``offset``), one pair per column, as ``torch.tril_indices``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.tril_indices(2, 2).tolist()
    [[0, 1, 1], [0, 0, 1]]
    """
    check_device(device, "tril_indices")
    return _leaf(np.stack(np.tril_indices(row, offset, col)).astype(dtype or np.int64), False)


def triu_indices(row: int, col: int, offset: int = 0, *, dtype=None,
                 device: Any = None) -> Tensor:
    """The (row, column) indices of the upper triangle of a ``row`` x ``col`` matrix (above
    and on diagonal ``offset``), as ``torch.triu_indices``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.triu_indices(2, 3, 1).tolist()
    [[0, 0, 1], [1, 2, 2]]
    """
    check_device(device, "triu_indices")
    return _leaf(np.stack(np.triu_indices(row, offset, col)).astype(dtype or np.int64), False)


def _source(generator: Generator | None) -> np.random.Generator:
    """The numpy generator behind ``generator=`` (default: the one ``manual_seed`` seeds)."""
    if generator is None:
        return defaults.generator
    if not isinstance(generator, Generator):
        raise TypeError(f"generator must be a pargraph.Generator, got "
                        f"{type(generator).__name__}")
    return generator.numpy_generator


def rand(*size, generator: Generator | None = None, dtype=None, requires_grad: bool = False,
         device: Any = None, **given: Any) -> Tensor:
    """Uniform random numbers in [0, 1), from ``generator`` or the one ``manual_seed`` seeds.

    Examples
    --------
    >>> import pargraph
    >>> bool(((pargraph.rand(100) >= 0) & (pargraph.rand(100) < 1)).all())
    True
    """
    if given:
        size = ops.keyword_sizes(given, "size", size, "rand")
    check_device(device, "rand")
    dtype, drawn_as = _random_dtypes(dtype, "check_uniform_bounds")
    shape = shape_arg(size)
    if drawn_as == dtype:
        return drawn(lambda: _source(generator).random(shape, dtype=dtype), requires_grad)
    below_one = 1 - ml_dtypes.finfo(dtype).epsneg  # rounding must not reach 1

    def draw() -> np.ndarray:
        return np.minimum(_source(generator).random(shape, dtype=drawn_as), below_one
                          ).astype(dtype)
    return drawn(draw, requires_grad)


def _random_dtypes(dtype: Any, kernel: str) -> tuple[np.dtype, np.dtype]:
    """The dtype of a random draw and the one numpy draws in: float16 and bfloat16 are drawn
    in float32 and rounded (numpy draws neither); an integer dtype raises PyTorch's error
    naming its ``kernel``."""
    dtype = np.dtype(dtype or defaults.float)
    if not ops.is_floating(dtype):
        raise NotImplementedError(f'"{kernel}" not implemented for '
                                  f"'{ops.torch_name(dtype)}'")
    return dtype, dtype if dtype.itemsize >= 4 else np.dtype(np.float32)


def randn(*size, generator: Generator | None = None, dtype=None, requires_grad: bool = False,
          device: Any = None, **given: Any) -> Tensor:
    """Standard normal random numbers, from ``generator`` or the one ``manual_seed`` seeds.

    Examples
    --------
    >>> import pargraph
    >>> g = pargraph.Generator().manual_seed(1)
    >>> pargraph.randn(2, 3, generator=g).shape
    pargraph.Size([2, 3])
    """
    if given:
        size = ops.keyword_sizes(given, "size", size, "randn")
    check_device(device, "randn")
    dtype, drawn_as = _random_dtypes(dtype, "normal_kernel_cpu")
    shape = shape_arg(size)
    return drawn(lambda: _source(generator).standard_normal(shape, dtype=drawn_as).astype(
        dtype, copy=False), requires_grad)


def randint(*args, size=None, generator: Generator | None = None, dtype=None,
            device: Any = None) -> Tensor:
    """Random integers: ``randint(high, size)`` or ``randint(low, high, size)``.

    Examples
    --------
    >>> import pargraph
    >>> int(pargraph.randint(0, 3, (10,)).max()) < 3
    True
    """
    check_device(device, "randint")
    if size is None:
        *args, size = args
    low, high = (0, args[0]) if len(args) == 1 else args
    shape = shape_arg((size,))
    return drawn(lambda: _source(generator).integers(low, high, size=shape).astype(
        dtype or int64))


def randperm(n: int, generator: Generator | None = None, dtype=None,
             device: Any = None) -> Tensor:
    """A random permutation of ``0 .. n-1``.

    Examples
    --------
    >>> import pargraph
    >>> sorted(pargraph.randperm(4).tolist())
    [0, 1, 2, 3]
    """
    check_device(device, "randperm")
    return drawn(lambda: _source(generator).permutation(n).astype(dtype or int64))


def rand_like(t: Tensor, dtype=None, requires_grad: bool = False,
              device: Any = None,
              layout: Any = None, memory_format: Any = None) -> Tensor:
    """``rand`` with the shape (and by default the dtype) of ``t``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.rand_like(pargraph.zeros(2, 2)).shape
    pargraph.Size([2, 2])
    """
    check_device(device, "rand_like")
    return rand(*t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad)


def randn_like(t: Tensor, dtype=None, requires_grad: bool = False,
               device: Any = None,
               layout: Any = None, memory_format: Any = None) -> Tensor:
    """``randn`` with the shape (and by default the dtype) of ``t``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.randn_like(pargraph.zeros(3)).shape
    pargraph.Size([3])
    """
    check_device(device, "randn_like")
    return randn(*t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad)


def randint_like(t: Tensor, low: int = 0, high: int | None = None, dtype=None,
                 device: Any = None,
                 layout: Any = None, memory_format: Any = None) -> Tensor:
    """``randint`` with the shape (and by default the dtype) of ``t``: ``randint_like(t,
    high)`` or ``randint_like(t, low, high)``.

    Examples
    --------
    >>> import pargraph
    >>> int(pargraph.randint_like(pargraph.zeros(5), 3).max()) < 3
    True
    """
    check_device(device, "randint_like")
    if high is None:
        low, high = 0, low
    return randint(low, high, tuple(t.shape), dtype=dtype or t.dtype)


def normal(mean: Any, std: Any = 1.0, size: Any = None, generator: Generator | None = None,
           dtype=None, requires_grad: bool = False, device: Any = None) -> Tensor:
    """Samples of N(mean, std²): ``mean`` and ``std`` numbers with a ``size``, or tensors
    broadcast together (each element its own distribution).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.normal(2.0, 0.0, size=(2,)).tolist()
    [2.0, 2.0]
    """
    check_device(device, "normal")
    tensors = isinstance(mean, Tensor) or isinstance(std, Tensor)
    if tensors:
        m = mean if isinstance(mean, Tensor) else as_tensor(mean)
        sd = std if isinstance(std, Tensor) else as_tensor(std)
        shape = tuple(np.broadcast_shapes(tuple(m.shape), tuple(sd.shape)))
        kind = m.dtype if ops.is_floating(m.dtype) else sd.dtype
        noise = drawn(lambda: _source(generator).standard_normal(shape).astype(kind))
        return m + sd * noise
    if size is None:
        raise TypeError("normal() with numbers for mean and std needs a size")
    shape, kind = shape_arg((size,)), np.dtype(dtype or defaults.float)
    out = drawn(lambda: _source(generator).normal(mean, std, size=shape).astype(kind))
    return out.requires_grad_(requires_grad) if requires_grad else out


class Generator:
    """A random number generator to hand to ``DataLoader``, ``random_split`` and the random
    factories, as PyTorch's ``torch.Generator``.

    Examples
    --------
    >>> import pargraph
    >>> a = pargraph.Generator().manual_seed(3).numpy_generator.random()
    >>> b = pargraph.Generator().manual_seed(3).numpy_generator.random()
    >>> a == b
    True
    """

    def __init__(self, device: Any = "cpu") -> None:
        check_device(device, "Generator")
        self._seed = fresh_seed()
        self.numpy_generator = np.random.default_rng(self._seed)

    def manual_seed(self, seed: int) -> Generator:
        self._seed = int(seed)
        self.numpy_generator = np.random.default_rng(self._seed)
        return self

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> Tensor:
        """Its state, as a ``uint8`` tensor that :meth:`set_state` puts back."""
        return _state_of(self.numpy_generator)

    def set_state(self, new_state: Tensor) -> Generator:
        """Put back a state :meth:`get_state` gave: the draws that followed it follow
        again."""
        _restore_state(self.numpy_generator, new_state)
        return self

    def seed(self) -> int:
        return self.manual_seed(fresh_seed())._seed

    def permutation(self, n: int) -> np.ndarray:
        return self.numpy_generator.permutation(n)
