"""Linear layers: ``Linear``, ``Bilinear``, ``Identity`` and ``LazyLinear``."""

from __future__ import annotations

import math
from typing import Any

from pargraph._tensor import Tensor
from pargraph.devices import check_device
from pargraph.nn import functional as F
from pargraph.nn import init
from pargraph.nn.module import Module
from pargraph.nn.modules.lazy import LazyModuleMixin, UninitializedParameter, _check_loaded


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


class LazyLinear(LazyModuleMixin, Linear):
    """A ``Linear`` whose ``in_features`` is the last dimension of its first input.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.LazyLinear(5)(pargraph.ones(2, 3)).shape
    pargraph.Size([2, 5])
    """

    cls_to_become = Linear

    def __init__(self, out_features: int, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__(0, 0, False)
        self.weight = UninitializedParameter(dtype=dtype)
        self.out_features = out_features
        if bias:
            self.bias = UninitializedParameter(dtype=dtype)
        self._lazy_hooks()

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input: Tensor, *_: Any) -> None:
        if self.has_uninitialized_params():
            self.in_features = input.shape[-1]
            self.weight.materialize((self.out_features, self.in_features))
            if self.bias is not None:
                self.bias.materialize((self.out_features,))
            self.reset_parameters()
        if self.in_features == 0:  # loaded from a state dict
            _check_loaded("in_features", input.shape[-1], self.weight.shape[-1])
            self.in_features = input.shape[-1]
