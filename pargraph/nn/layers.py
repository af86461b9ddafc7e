"""Layers and containers: Linear, activations, Dropout, Flatten, Identity, Sequential, ..."""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from pargraph._tensor import Tensor
from pargraph.devices import check_device
from pargraph.execution import worker_threads
from pargraph.functions import cat
from pargraph.nn import functional as F
from pargraph.nn import init
from pargraph.nn.module import Module


class Linear(Module):
    """y = x @ weight.T + bias, with PyTorch's default initialization.

    Examples
    --------
    >>> import pargraph
    >>> layer = pargraph.nn.Linear(3, 2)
    >>> layer(pargraph.ones(4, 3)).shape
    pargraph.Size([4, 2])
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        check_device(device, "Linear")
        self.in_features, self.out_features = in_features, out_features
        self._weight_and_bias((out_features, in_features), out_features, bias, dtype)

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input: Tensor) -> Tensor:
        shape = input.shape
        if not shape or shape[-1] != self.in_features:
            raise RuntimeError(
                f"{self.describe()}: expected input with last dimension {self.in_features} "
                f"(in_features), got input of shape {shape}"
            )
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class NonDynamicallyQuantizableLinear(Linear):
    """``Linear`` under the name PyTorch gives ``MultiheadAttention.out_proj`` (the name it
    prints)."""


class Bilinear(Module):
    """y = x1 @ weight[o] @ x2 + bias_o for each output ``o``, with PyTorch's initialization
    (uniform within 1/sqrt(in1_features)).

    Examples
    --------
    >>> import pargraph
    >>> layer = pargraph.nn.Bilinear(3, 4, 2)
    >>> layer(pargraph.ones(5, 3), pargraph.ones(5, 4)).shape
    pargraph.Size([5, 2])
    """

    def __init__(self, in1_features: int, in2_features: int, out_features: int,
                 bias: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        check_device(device, "Bilinear")
        self.in1_features, self.in2_features = in1_features, in2_features
        self.out_features = out_features
        self._weight_and_bias((out_features, in1_features, in2_features), out_features, bias,
                              dtype)

    def reset_parameters(self) -> None:
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class ReLU(Module):
    """Elementwise max(x, 0).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.ReLU()(pargraph.tensor([-1.0, 1.0]))
    tensor([0., 1.])
    """

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.relu(input, self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Sigmoid(Module):
    """Elementwise logistic function.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Sigmoid()(pargraph.zeros(1))
    tensor([0.5000])
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.sigmoid(input)


class Tanh(Module):
    """Elementwise hyperbolic tangent.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Tanh()(pargraph.zeros(1))
    tensor([0.])
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.tanh(input)


class LeakyReLU(Module):
    """Elementwise ``x`` where positive, else ``negative_slope * x``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.LeakyReLU(0.5)(pargraph.tensor([-2.0, 1.0]))
    tensor([-1.,  1.])
    """

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace
                                                          else "")


class SiLU(Module):
    """Elementwise ``x * sigmoid(x)``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.SiLU()(pargraph.zeros(2))
    tensor([0., 0.])
    """

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.silu(input, self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Softplus(Module):
    """Elementwise ``log(1 + exp(beta * x)) / beta``, linear above ``threshold``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Softplus()(pargraph.zeros(1))
    tensor([0.6931])
    """

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input: Tensor) -> Tensor:
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class LogSoftmax(Module):
    """log(softmax(x)) along ``dim``.

    Examples
    --------
    >>> import pargraph
    >>> round(pargraph.nn.LogSoftmax(dim=0)(pargraph.zeros(2))[0].item(), 4)
    -0.6931
    """

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.log_softmax(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax(Module):
    """Softmax along ``dim``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Softmax(dim=0)(pargraph.zeros(2))
    tensor([0.5000, 0.5000])
    """

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.softmax(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax2d(Module):
    """Softmax over the channels of ``(N, C, H, W)`` or ``(C, H, W)`` input, at each place.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Softmax2d()(pargraph.zeros(2, 2, 2)).sum(0).tolist()
    [[1.0, 1.0], [1.0, 1.0]]
    """

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.ndim}D "
                             f"instead")
        return F.softmax(input, -3)


class Dropout(Module):
    """Zero elements with probability ``p`` in training mode; the identity in eval mode.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Dropout(0.5).eval()(pargraph.ones(2))
    tensor([1., 1.])
    """

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        F._check_probability(p)
        self.p, self.inplace = p, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Flatten(Module):
    """Flatten dimensions ``start_dim`` to ``end_dim`` (the batch dimension stays).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Flatten()(pargraph.zeros(2, 3, 4)).shape
    pargraph.Size([2, 12])
    """

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input: Tensor) -> Tensor:
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Identity(Module):
    """Return the input unchanged.

    Examples
    --------
    >>> import pargraph
    >>> x = pargraph.ones(1); pargraph.nn.Identity()(x) is x
    True
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:
        return input


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


class DataParallel(Module):
    """Run ``module`` on shards of the batch as independent branches of one graph.

    The inputs are split along their first dimension into ``shards`` pieces (by default one per
    worker thread of the cluster, or of the local threaded scheduler); each shard's forward and
    backward pass is its own branch, and each parameter's gradient is accumulated at its fan-in
    across the shards. Outputs are concatenated, so losses and gradients equal those of the
    whole batch. Parameter names get the ``module.`` prefix, as in PyTorch.

    Examples
    --------
    >>> import pargraph
    >>> model = pargraph.nn.DataParallel(pargraph.nn.Linear(3, 2), shards=2)
    >>> model(pargraph.ones(8, 3)).shape
    pargraph.Size([8, 2])
    >>> [name for name, _ in model.named_parameters()]
    ['module.weight', 'module.bias']
    """

    def __init__(self, module: Module, shards: int | None = None) -> None:
        super().__init__()
        if shards is not None and shards < 1:
            raise ValueError(f"DataParallel: shards must be at least 1, got {shards}")
        self.module = module
        self.shards = shards

    def forward(self, *inputs: Tensor) -> Tensor:
        if not inputs or not inputs[0].shape:
            raise ValueError("DataParallel: expected inputs with a batch dimension")
        batch = inputs[0].shape[0]
        shards = min(self.shards or worker_threads(), batch)
        if shards <= 1:
            return self.module(*inputs)
        pieces = [x.chunk(shards) if isinstance(x, Tensor) else [x] * shards for x in inputs]
        return cat([self.module(*args) for args in zip(*pieces)])

    def extra_repr(self) -> str:
        return f"shards={self.shards or 'auto'}"
