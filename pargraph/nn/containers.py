"""Parameter containers, shape and padding modules, and the channel-wise dropouts: small
modules PyTorch programs reach for, each a thin wrapper over ops that exist."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from pargraph._tensor import Tensor
from pargraph.nn import functional as F
from pargraph.nn.module import Module, Parameter


class ParameterList(Module):
    """A list of parameters, registered so that ``parameters()`` finds them.

    Examples
    --------
    >>> import pargraph
    >>> params = pargraph.nn.ParameterList([pargraph.nn.Parameter(pargraph.ones(2))])
    >>> len(list(params.parameters())), len(params)
    (1, 1)
    """

    def __init__(self, values: Iterable[Any] | None = None) -> None:
        super().__init__()
        for value in values or ():
            self.append(value)

    def __getitem__(self, index: int) -> Parameter:
        return list(self._parameters.values())[index]

    def __setitem__(self, index: int, value: Any) -> None:
        name = list(self._parameters)[index]
        self.register_parameter(name, value if isinstance(value, Parameter)
                                else Parameter(value))

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self) -> Iterator[Parameter]:
        return iter(self._parameters.values())

    def append(self, value: Any) -> ParameterList:
        self.register_parameter(str(len(self)), value if isinstance(value, Parameter)
                                else Parameter(value))
        return self

    def extend(self, values: Iterable[Any]) -> ParameterList:
        for value in values:
            self.append(value)
        return self

    def __iadd__(self, values: Iterable[Any]) -> ParameterList:
        return self.extend(values)


class ParameterDict(Module):
    """A dict of parameters by name, registered so that ``parameters()`` finds them.

    Examples
    --------
    >>> import pargraph
    >>> params = pargraph.nn.ParameterDict({"scale": pargraph.nn.Parameter(pargraph.ones(1))})
    >>> [name for name, _ in params.named_parameters()]
    ['scale']
    """

    def __init__(self, parameters: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        for name, value in (parameters or {}).items():
            self[name] = value

    def __getitem__(self, name: str) -> Parameter:
        return self._parameters[name]

    def __setitem__(self, name: str, value: Any) -> None:
        self.register_parameter(name, value if isinstance(value, Parameter)
                                else Parameter(value))

    def __contains__(self, name: object) -> bool:
        return name in self._parameters

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self) -> Iterator[str]:
        return iter(self._parameters)

    def keys(self):
        return self._parameters.keys()

    def values(self):
        return self._parameters.values()

    def items(self):
        return self._parameters.items()

    def __delitem__(self, name: str) -> None:
        del self._parameters[name]
        self._registry_changed()

    def __reversed__(self) -> Iterator[str]:
        return reversed(list(self._parameters))

    def get(self, name: str, default: Any = None) -> Any:
        return self._parameters.get(name, default)

    def pop(self, name: str) -> Parameter:
        """Remove the parameter ``name`` and return it."""
        value = self._parameters[name]
        del self[name]
        return value

    def popitem(self) -> tuple[str, Parameter]:
        """Remove the last parameter added and return ``(name, parameter)``."""
        name = list(self._parameters)[-1]
        return name, self.pop(name)

    def setdefault(self, name: str, default: Any = None) -> Any:
        if name not in self:
            self[name] = default
        return self[name]

    def clear(self) -> None:
        self._parameters.clear()
        self._registry_changed()

    def update(self, values: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> None:
        """Add (or replace) the parameters of a mapping or of ``(name, value)`` pairs."""
        for name, value in (values.items() if isinstance(values, Mapping) else values):
            self[name] = value

    def copy(self) -> ParameterDict:
        """A new ParameterDict holding the same parameters."""
        return ParameterDict(dict(self._parameters))

    def fromkeys(self, keys: Iterable[str], default: Any = None) -> ParameterDict:
        """A new ParameterDict with ``default`` under each key."""
        return ParameterDict({name: default for name in keys})


class Unflatten(Module):
    """Dimension ``dim`` unflattened into ``unflattened_size``.

    Examples
    --------
    >>> import pargraph
    >>> tuple(pargraph.nn.Unflatten(1, (2, 3))(pargraph.ones(4, 6)).shape)
    (4, 2, 3)
    """

    def __init__(self, dim: int, unflattened_size: tuple) -> None:
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, input: Tensor) -> Tensor:
        shape = tuple(input.shape)
        d = self.dim % len(shape)
        return input.reshape(shape[:d] + self.unflattened_size + shape[d + 1:])

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class _DropoutNd(Module):
    """Zero whole channels (dimension 1 of a batched input) with probability ``p``."""

    spatial = 1

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        F._check_probability(p)
        self.p, self.inplace = p, inplace

    def forward(self, input: Tensor) -> Tensor:
        return getattr(F, f"dropout{self.spatial}d")(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class AlphaDropout(_DropoutNd):
    """Dropout for SELU networks: dropped elements take SELU's negative saturation value and
    an affine map keeps a unit normal input's mean and variance (in training only).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.AlphaDropout(0.2).eval()(pargraph.ones(3)).tolist()
    [1.0, 1.0, 1.0]
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.alpha_dropout(input, self.p, self.training, self.inplace)


class FeatureAlphaDropout(_DropoutNd):
    """Alpha dropout of whole channels.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.FeatureAlphaDropout(0.0)(pargraph.ones(1, 2, 2)).sum().item()
    4.0
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.feature_alpha_dropout(input, self.p, self.training, self.inplace)


class Dropout1d(_DropoutNd):
    """Zero whole channels of ``(N, C, L)`` (or ``(C, L)``) inputs, scaling the rest.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Dropout1d(0.5).eval()(pargraph.ones(1, 2, 3)).sum().item()
    6.0
    """

    spatial = 1


class Dropout2d(_DropoutNd):
    """Zero whole channels of ``(N, C, H, W)`` (or ``(C, H, W)``) inputs, scaling the rest.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Dropout2d(0.0)(pargraph.ones(1, 2, 2, 2)).sum().item()
    8.0
    """

    spatial = 2


class Dropout3d(_DropoutNd):
    """Zero whole channels of ``(N, C, D, H, W)`` (or ``(C, D, H, W)``) inputs.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Dropout3d(0.0)(pargraph.ones(1, 1, 1, 1, 1)).item()
    1.0
    """

    spatial = 3


class _Pad(Module):
    """``F.pad`` with a fixed padding and mode."""

    mode = "constant"
    dims = 1

    def __init__(self, padding: Any, value: float = 0.0) -> None:
        super().__init__()
        self.padding = (padding,) * (2 * self.dims) if isinstance(padding, int) \
            else tuple(padding)
        if len(self.padding) != 2 * self.dims:
            raise ValueError(f"{type(self).__name__}: padding must be an int or "
                             f"{2 * self.dims} ints, got {padding!r}")
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        if self.mode == "constant":
            return F.pad(input, self.padding, "constant", self.value)
        return F.pad(input, self.padding, self.mode)

    def extra_repr(self) -> str:
        if self.mode == "constant" and self.value:  # PyTorch's ConstantPad names both
            return f"padding={self.padding}, value={self.value}"
        return f"{self.padding}"


def _pad_class(name: str, mode: str, dims: int) -> type:
    """A padding module class with PyTorch's signature: ``(padding, value)`` for the
    constant pads, ``(padding)`` for the others."""
    if name.startswith("Constant"):
        def __init__(self, padding: Any, value: float) -> None:
            _Pad.__init__(self, padding, value)
        arguments = "1, 0.5"
    else:
        def __init__(self, padding: Any) -> None:
            _Pad.__init__(self, padding)
        arguments = "1"
    sizes = ", ".join(["1", "1"] + ["2"] * dims)  # (N, C, spatial...)
    doc = (f"``F.pad`` in mode {mode!r} over the last {dims} dimension(s).\n\n    Examples\n"
           f"    --------\n    >>> import pargraph\n    >>> tuple(pargraph.nn.{name}({arguments})"
           f"(pargraph.ones({sizes})).shape)[-1]\n    4\n    ")
    return type(name, (_Pad,), {"mode": mode, "dims": dims, "__doc__": doc,
                                "__init__": __init__, "__module__": __name__})


ZeroPad1d = _pad_class("ZeroPad1d", "constant", 1)
ZeroPad2d = _pad_class("ZeroPad2d", "constant", 2)
ConstantPad1d = _pad_class("ConstantPad1d", "constant", 1)
ConstantPad2d = _pad_class("ConstantPad2d", "constant", 2)
ReflectionPad1d = _pad_class("ReflectionPad1d", "reflect", 1)
ReflectionPad2d = _pad_class("ReflectionPad2d", "reflect", 2)
ReplicationPad1d = _pad_class("ReplicationPad1d", "replicate", 1)
ReplicationPad2d = _pad_class("ReplicationPad2d", "replicate", 2)
CircularPad1d = _pad_class("CircularPad1d", "circular", 1)
CircularPad2d = _pad_class("CircularPad2d", "circular", 2)
ZeroPad3d = _pad_class("ZeroPad3d", "constant", 3)
ConstantPad3d = _pad_class("ConstantPad3d", "constant", 3)
ReflectionPad3d = _pad_class("ReflectionPad3d", "reflect", 3)
ReplicationPad3d = _pad_class("ReplicationPad3d", "replicate", 3)
CircularPad3d = _pad_class("CircularPad3d", "circular", 3)
