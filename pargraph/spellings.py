"""How PyTorch reads a method's arguments: numpy's spellings, empty and 0-d dims, tensors only.

PyTorch's argument parser takes numpy's names beside its own for every native method and
function: ``axis`` for ``dim`` and ``keepdims`` for ``keepdim`` (``x.sum(axis=1,
keepdims=True)`` is ``x.sum(dim=1, keepdim=True)``), and still the deprecated overloads that put
a scale first (``p.data.add_(-lr, p.grad)``), with a warning. And for the ops that take a
``dim``, a 0-d tensor has one dimension, 0 or -1: a reduction, scan, sort or flip of it along
that dimension is the op on its one element, and the result is 0-d again. An empty ``dim`` of a
sum or mean is every dimension. And some binary ops take a tensor only as their second argument
(``torch.maximum(x, 2)`` is a TypeError).

:func:`install` wraps the Tensor methods that take a ``dim`` or ``keepdim`` once, when the class
is complete; the ``pargraph.<name>`` functions call the methods, and follow.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable
from typing import Any

from pargraph.graph import user_stacklevel

#: numpy's spellings PyTorch's parser takes, and the names they stand for.
ALIASES = {"axis": "dim", "keepdims": "keepdim"}

#: The methods that treat a 0-d tensor as having one dimension of size 1 along ``dim``
#: (``dims`` for ``flip``), as PyTorch's kernels do.
ZERO_D = frozenset(
    "softmax log_softmax softmin cumsum cumprod logcumsumexp cummax cummin sort argsort topk "
    "kthvalue mode median nanmedian max min argmax argmin amax amin aminmax sum nansum prod "
    "mean nanmean std var std_mean var_mean logsumexp all any count_nonzero flip".split())


#: The reductions for which an empty ``dim`` (``()``, ``[]``) means every dimension, as
#: PyTorch's ``dim: int[]?`` arguments read it (``any``, ``all`` and ``flip`` take it as none).
EMPTY_IS_ALL = frozenset(
    "sum nansum mean nanmean amax amin std var std_mean var_mean count_nonzero".split())


#: The methods whose second argument PyTorch takes as a tensor only (no Python number).
TENSOR_OTHER = frozenset(
    "hypot nextafter atan2 arctan2 minimum maximum fmin fmax logical_and logical_or logical_xor "
    "ldexp isclose dist cross matmul gcd lcm igamma igammac kron outer logaddexp logaddexp2 "
    "heaviside".split())


#: PyTorch's deprecated overloads that take the scale first (``x.add_(-lr, g)`` is
#: ``x.add_(g, alpha=-lr)``): the method, the scale's name, and the modern signature.
SCALE_FIRST = {
    "add": ("alpha", "Tensor other"), "add_": ("alpha", "Tensor other"),
    "sub": ("alpha", "Tensor other"), "sub_": ("alpha", "Tensor other"),
    "addcmul": ("value", "Tensor tensor1, Tensor tensor2"),
    "addcmul_": ("value", "Tensor tensor1, Tensor tensor2"),
    "addcdiv": ("value", "Tensor tensor1, Tensor tensor2"),
    "addcdiv_": ("value", "Tensor tensor1, Tensor tensor2"),
}


def install(cls: type) -> None:
    """Wrap ``cls``'s public methods that take ``dim``/``keepdim``/``dims``, and those of
    :data:`TENSOR_OTHER` and :data:`SCALE_FIRST` (see the module's docstring)."""
    for name in dir(cls):
        if name.startswith("_"):
            continue
        method = inspect.getattr_static(cls, name)
        if not inspect.isfunction(method):
            continue
        try:
            parameters = list(inspect.signature(method).parameters)
        except (TypeError, ValueError):
            continue
        spelled = any(p in parameters for p in ALIASES.values())
        dim_name = next((p for p in ("dim", "dims") if p in parameters), None)
        zero_d = name in ZERO_D and dim_name is not None
        if spelled or zero_d:
            position = parameters.index(dim_name) - 1 if zero_d else -1  # after ``self``
            setattr(cls, name, _wrapped(method, spelled, dim_name if zero_d else None,
                                        position, name in EMPTY_IS_ALL))
        elif name in TENSOR_OTHER:
            setattr(cls, name, _tensor_other(method, parameters[1]))
        elif name in SCALE_FIRST:
            setattr(cls, name, _scale_first(method, *SCALE_FIRST[name]))


def _tensor_other(method: Callable, argument: str) -> Callable:
    name = method.__name__

    @functools.wraps(method)
    def wrapper(self: Any, other: Any, *args: Any, **kwargs: Any) -> Any:
        if not hasattr(other, "_node"):
            raise TypeError(f"{name}(): argument '{argument}' (position 2) must be Tensor, "
                            f"not {type(other).__name__}")
        return method(self, other, *args, **kwargs)

    return wrapper


def _scale_first(method: Callable, scale: str, tensors: str) -> Callable:
    """``method`` also taking PyTorch's deprecated overload ``(Number scale, *tensors)``,
    with PyTorch's warning."""
    name = method.__name__
    count = tensors.count("Tensor")

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if len(args) == count + 1 and isinstance(args[0], (int, float)) and \
                scale not in kwargs:  # a bool too: PyTorch reads it as a Number
            warnings.warn(f"This overload of {name} is deprecated:\n\t{name}(Number {scale}, "
                          f"{tensors})\nConsider using one of the following signatures "
                          f"instead:\n\t{name}({tensors}, *, Number {scale} = 1)",
                          UserWarning, stacklevel=user_stacklevel())
            return method(self, *args[1:], **{scale: args[0]}, **kwargs)
        return method(self, *args, **kwargs)

    return wrapper


def _wrapped(method: Callable, spelled: bool, dim_name: str | None, position: int,
             empty_is_all: bool) -> Callable:
    name = method.__name__

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs and spelled:
            for alias, own in ALIASES.items():
                if alias in kwargs:
                    if own in kwargs:
                        raise TypeError(f"{name}() got multiple values for argument '{own}'")
                    kwargs[own] = kwargs.pop(alias)
        if empty_is_all:
            if len(args) > position and type(args[position]) in (tuple, list) and \
                    not args[position]:
                args = (*args[:position], None, *args[position + 1:])
            elif type(kwargs.get(dim_name)) in (tuple, list) and not kwargs[dim_name]:
                kwargs[dim_name] = None
        if dim_name is not None and not self._node.shape:
            return _on_one_element(self, method, args, kwargs, dim_name, position)
        return method(self, *args, **kwargs)

    return wrapper


def _on_one_element(tensor: Any, method: Callable, args: tuple, kwargs: dict, dim_name: str,
                    position: int) -> Any:
    """``method`` of a 0-d ``tensor`` along its one dimension: the method of its 1-element
    view along dimension 0, with each tensor result made 0-d again."""
    by_keyword = dim_name in kwargs
    dim = kwargs[dim_name] if by_keyword else args[position] if len(args) > position else None
    if dim is None:
        return method(tensor, *args, **kwargs)
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    for d in dims:
        if not isinstance(d, int) or not -1 <= d <= 0:
            raise IndexError("Dimension out of range (expected to be in range of [-1, 0], but "
                             f"got {d})")
    if len(dims) > 1:  # 0 and -1 are the same one dimension
        raise RuntimeError(f"{method.__name__}: dim 0 appears multiple times in the list of "
                           "dims")
    zero = 0 if isinstance(dim, int) else (0,) * len(dims)
    if by_keyword:
        kwargs = {**kwargs, dim_name: zero}
    else:
        args = (*args[:position], zero, *args[position + 1:])
    result = method(tensor.reshape(1), *args, **kwargs)
    return _as_0d(result)


def _as_0d(result: Any) -> Any:
    if hasattr(result, "_node"):
        return result.reshape(()) if result.ndim == 1 and result.shape[0] == 1 else result
    if isinstance(result, tuple):
        parts = [_as_0d(r) for r in result]
        return type(result)(*parts) if hasattr(result, "_fields") else type(result)(parts)
    return result
