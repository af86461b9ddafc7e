"""Containers: ``Sequential``, ``ModuleList``, ``ModuleDict``, ``ParameterList``,
``ParameterDict``."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from pargraph.nn.module import Module, Parameter


class _ModuleSequence(Module):
    """What Sequential and ModuleList share: children named by their positions, which
    deleting and inserting renumber, as PyTorch's do."""

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def _position(self, index: int) -> int:
        if not -len(self) <= index < len(self):
            raise IndexError(f"index {index} is out of range")
        return index % len(self)

    def __setitem__(self, index: int, module: Module) -> None:
        self.add_module(list(self._modules)[self._position(index)], module)

    def __delitem__(self, index: int | slice) -> None:
        modules = list(self._modules.values())
        if isinstance(index, slice):
            del modules[index]
        else:
            del modules[self._position(index)]
        self._set_children([(str(k), m) for k, m in enumerate(modules)])

    def insert(self, index: int, module: Module) -> Any:
        """Put ``module`` at ``index``, the ones from there one further."""
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")
        n = len(self)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        modules = list(self._modules.values())
        modules.insert(index % (n + 1) if index < 0 else index, module)
        self._set_children([(str(k), m) for k, m in enumerate(modules)])
        return self

    def pop(self, index: int | slice = -1) -> Any:
        """Remove the module at ``index`` and return it."""
        module = self[index]
        del self[index]
        return module

    def extend(self, modules: Iterable[Module]) -> Any:
        for module in list(modules):
            self.add_module(str(len(self)), module)
        return self

    def __iadd__(self, modules: Iterable[Module]) -> Any:
        return self.extend(modules)


class Sequential(_ModuleSequence):
    """Modules applied one after another; indexable, sliceable, with ``len``.

    Examples
    --------
    >>> from pargraph import nn
    >>> model = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    >>> len(model), type(model[1]).__name__, len(model[:2])
    (3, 'ReLU', 2)
    """

    def __init__(self, *modules: Module) -> None:
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, module in modules[0].items():
                self.add_module(name, module)
        else:
            for index, module in enumerate(modules):
                self.add_module(str(index), module)

    def __getitem__(self, index: int | slice) -> Module:
        items = list(self._modules.items())
        if isinstance(index, slice):
            return Sequential(OrderedDict(items[index]))
        return items[index][1]

    def append(self, module: Module) -> Sequential:
        self.add_module(str(len(self)), module)
        return self

    def __add__(self, other: Sequential) -> Sequential:
        if not isinstance(other, Sequential):
            raise ValueError("add operator supports only objects of Sequential class, but "
                             f"{type(other)} is given.")
        return Sequential(*self, *other)

    def __mul__(self, times: int) -> Sequential:
        if not isinstance(times, int):
            raise TypeError(f"unsupported operand type(s) for *: {type(self)} and "
                            f"{type(times)}")
        if times <= 0:
            raise ValueError(f"Non-positive multiplication factor {times} for {type(self)}")
        return Sequential(*(list(self) * times))

    __rmul__ = __mul__

    def forward(self, input: Any) -> Any:
        for module in self:
            input = module(input)
        return input


class ModuleList(_ModuleSequence):
    """A list of modules, registered so their parameters are found.

    Examples
    --------
    >>> from pargraph import nn
    >>> layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    >>> len(list(layers.parameters()))
    6
    """

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        for module in modules or ():
            self.append(module)

    def __getitem__(self, index: int | slice) -> Module | ModuleList:
        values = list(self._modules.values())
        return ModuleList(values[index]) if isinstance(index, slice) else values[index]

    def append(self, module: Module) -> ModuleList:
        self.add_module(str(len(self)), module)
        return self

    def __add__(self, other: Iterable[Module]) -> ModuleList:
        return ModuleList([*self, *other])


class ModuleDict(Module):
    """A dict of modules, registered so their parameters are found.

    Examples
    --------
    >>> from pargraph import nn
    >>> heads = nn.ModuleDict({"a": nn.Linear(2, 1), "b": nn.Linear(2, 1)})
    >>> sorted(heads.keys())
    ['a', 'b']
    """

    def __init__(self, modules: Mapping[str, Module] | None = None) -> None:
        super().__init__()
        for name, module in (modules or {}).items():
            self[name] = module

    def __getitem__(self, name: str) -> Module:
        return self._modules[name]

    def __setitem__(self, name: str, module: Module) -> None:
        self.add_module(name, module)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, name: str) -> bool:
        return name in self._modules

    def __delitem__(self, name: str) -> None:
        del self._modules[name]
        self._registry_changed()

    def pop(self, name: str) -> Module:
        """Remove the module ``name`` and return it."""
        module = self._modules[name]
        del self[name]
        return module

    def clear(self) -> None:
        """Remove every module."""
        self._modules.clear()
        self._registry_changed()

    def update(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]]) -> None:
        """Add (or replace) the modules of a mapping or of ``(name, module)`` pairs."""
        pairs = modules.items() if isinstance(modules, Mapping) else modules
        for j, pair in enumerate(pairs):
            if isinstance(modules, Mapping):
                name, module = pair
            else:
                pair = tuple(pair)
                if len(pair) != 2:
                    raise ValueError(f"ModuleDict update sequence element #{j} has length "
                                     f"{len(pair)}; 2 is required")
                name, module = pair
            self[name] = module

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()


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
