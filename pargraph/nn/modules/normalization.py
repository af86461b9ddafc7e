"""Normalization layers: ``LayerNorm``, ``GroupNorm``, ``RMSNorm``, ``LocalResponseNorm``."""

from __future__ import annotations

from typing import Any

from pargraph._tensor import Tensor
from pargraph.devices import check_device
from pargraph.factories import ones, zeros
from pargraph.nn.functional.normalization import (
    _as_shape,
    group_norm,
    layer_norm,
    local_response_norm,
    rms_norm,
)
from pargraph.nn.module import Module, Parameter


def _affine_parameters(module: Module, shape: tuple[int, ...], affine: bool,
                       bias: bool | None) -> None:
    """A norm's learned scale (ones) and shift (zeros) of ``shape``, or ``None`` where there
    is none (``bias=None``: the norm has no shift at all, as RMSNorm)."""
    module.register_parameter("weight", Parameter(ones(*shape)) if affine else None)
    if bias is not None:
        module.register_parameter("bias", Parameter(zeros(*shape)) if affine and bias else None)


class LayerNorm(Module):
    """Layer normalization over the trailing ``normalized_shape`` dimensions, with a learned
    elementwise scale (ones) and shift (zeros).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.LayerNorm(4)(pargraph.randn(2, 3, 4)).shape
    pargraph.Size([2, 3, 4])
    """

    def __init__(self, normalized_shape: Any, eps: float = 1e-5,
                 elementwise_affine: bool = True, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        check_device(device, "LayerNorm")
        self.normalized_shape, self.eps = _as_shape(normalized_shape), eps
        self.elementwise_affine = elementwise_affine
        _affine_parameters(self, self.normalized_shape, elementwise_affine, bias)
        if dtype is not None:
            self.to(dtype)

    def forward(self, input: Tensor) -> Tensor:
        return layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")


class GroupNorm(Module):
    """Group normalization of ``(N, C, ...)`` input: ``num_groups`` groups of channels, with a
    learned scale (ones) and shift (zeros) per channel.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.GroupNorm(2, 6)(pargraph.randn(4, 6, 5)).shape
    pargraph.Size([4, 6, 5])
    """

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True, device: Any = None, dtype: Any = None, *,
                 bias: bool = True) -> None:
        super().__init__()
        check_device(device, "GroupNorm")
        if num_channels % num_groups:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups "
                             f"({num_groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = \
            num_groups, num_channels, eps, affine
        _affine_parameters(self, (num_channels,), affine, bias)
        if dtype is not None:
            self.to(dtype)

    def forward(self, input: Tensor) -> Tensor:
        return group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class LocalResponseNorm(Module):
    """:func:`~pargraph.nn.functional.local_response_norm` as a module.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.LocalResponseNorm(2)(pargraph.ones(1, 4, 3, 3)).shape
    pargraph.Size([1, 4, 3, 3])
    """

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75,
                 k: float = 1.0) -> None:
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input: Tensor) -> Tensor:
        return local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


class RMSNorm(Module):
    """Root mean square normalization over the trailing ``normalized_shape`` dimensions, with
    a learned elementwise scale (ones).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.RMSNorm(4)(pargraph.randn(2, 4)).shape
    pargraph.Size([2, 4])
    """

    def __init__(self, normalized_shape: Any, eps: float | None = None,
                 elementwise_affine: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        check_device(device, "RMSNorm")
        self.normalized_shape, self.eps = _as_shape(normalized_shape), eps
        self.elementwise_affine = elementwise_affine
        _affine_parameters(self, self.normalized_shape, elementwise_affine, bias=None)
        if dtype is not None:
            self.to(dtype)

    def forward(self, input: Tensor) -> Tensor:
        return rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")
