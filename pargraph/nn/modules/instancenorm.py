"""Instance normalization layers."""

from __future__ import annotations

from typing import Any

from pargraph._tensor import Tensor
from pargraph.nn.functional.normalization import instance_norm
from pargraph.nn.modules.batchnorm import _BatchNorm
from pargraph.nn.modules.lazy import _lazy_norm


class _InstanceNorm(_BatchNorm):
    spatial = 0

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = False, track_running_stats: bool = False, device: Any = None,
                 dtype: Any = None, *, bias: bool = True) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype, bias=bias)

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim not in (self.spatial + 1, self.spatial + 2):
            raise ValueError(f"expected {self.spatial + 1}D or {self.spatial + 2}D input "
                             f"(got {input.ndim}D input)")
        unbatched = input.ndim == self.spatial + 1
        x = input.unsqueeze(0) if unbatched else input
        if self.affine and x.shape[1] != self.num_features:
            raise ValueError(f"expected input's size at dim=1 to match num_features "
                             f"({self.num_features}), but got: {x.shape[1]}.")
        use_input_stats = self.training or not self.track_running_stats
        momentum = 0.1 if self.momentum is None else self.momentum
        out = instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            use_input_stats, momentum, self.eps)
        return out.squeeze(0) if unbatched else out


class InstanceNorm1d(_InstanceNorm):
    """Instance normalization of ``(N, C, L)`` or ``(C, L)`` input: each channel of each
    sample over its length (no affine, no running statistics by default, as PyTorch's).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.InstanceNorm1d(3)(pargraph.randn(2, 3, 8)).shape
    pargraph.Size([2, 3, 8])
    """

    spatial = 1


class InstanceNorm2d(_InstanceNorm):
    """Instance normalization of ``(N, C, H, W)`` or ``(C, H, W)`` input.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.InstanceNorm2d(3, affine=True)(pargraph.randn(2, 3, 4, 4)).shape
    pargraph.Size([2, 3, 4, 4])
    """

    spatial = 2


class InstanceNorm3d(_InstanceNorm):
    """Instance normalization of ``(N, C, D, H, W)`` or ``(C, D, H, W)`` input.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.InstanceNorm3d(3)(pargraph.randn(2, 3, 4, 4, 4)).shape
    pargraph.Size([2, 3, 4, 4, 4])
    """

    spatial = 3


LazyInstanceNorm1d = _lazy_norm(InstanceNorm1d)


LazyInstanceNorm2d = _lazy_norm(InstanceNorm2d)


LazyInstanceNorm3d = _lazy_norm(InstanceNorm3d)
