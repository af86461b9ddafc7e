"""Batch normalization layers, their running statistics, and ``SyncBatchNorm``."""

from __future__ import annotations

from typing import Any

from pargraph._tensor import Tensor, int64
from pargraph.autograd.mode import no_grad
from pargraph.devices import check_device
from pargraph.engine import execution
from pargraph.factories import ones, zeros
from pargraph.nn.functional.normalization import batch_norm
from pargraph.nn.module import Module
from pargraph.nn.modules.lazy import _lazy_norm
from pargraph.nn.modules.normalization import _affine_parameters


class _BatchNorm(Module):
    dims: tuple[int, ...] = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, device: Any = None,
                 dtype: Any = None, *, bias: bool = True) -> None:
        super().__init__()
        check_device(device, type(self).__name__)
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        _affine_parameters(self, (num_features,), affine, bias)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features))
            self.register_buffer("running_var", ones(num_features))
            self.register_buffer("num_batches_tracked", zeros((), dtype=int64))
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)
        if dtype is not None:
            self.to(dtype)

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1.0)
            self.num_batches_tracked.zero_()

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim not in self.dims or input.shape[1] != self.num_features:
            raise ValueError(f"{self.describe()}: expected {' or '.join(map(str, self.dims))}-D "
                             f"input with {self.num_features} channels (num_features), got "
                             f"input of shape {input.shape}")
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            replaced = self.num_batches_tracked._node
            with no_grad():
                self.num_batches_tracked.add_(1)
            execution.defer([self.num_batches_tracked._node], state=True, replaces=[replaced])
            if self.momentum is None:  # a cumulative moving average, kept lazy
                momentum = 1.0 / self.num_batches_tracked.double()
        use_batch = self.training or not self.track_running_stats
        tracked = not self.training or self.track_running_stats
        return batch_norm(input, self.running_mean if tracked else None,
                          self.running_var if tracked else None, self.weight, self.bias,
                          use_batch, momentum, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch normalization of ``(N, C)`` or ``(N, C, L)`` input, with running statistics
    (buffers, saved in ``state_dict``) for evaluation.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.BatchNorm1d(3)(pargraph.randn(8, 3)).shape
    pargraph.Size([8, 3])
    """

    dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalization of ``(N, C, H, W)`` input, per channel.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.BatchNorm2d(3)(pargraph.randn(4, 3, 5, 5)).shape
    pargraph.Size([4, 3, 5, 5])
    """

    dims = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch normalization of ``(N, C, D, H, W)`` input, per channel.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.BatchNorm3d(3)(pargraph.randn(2, 3, 4, 4, 4)).shape
    pargraph.Size([2, 3, 4, 4, 4])
    """

    dims = (5,)


class SyncBatchNorm(_BatchNorm):
    """Batch normalization of ``(N, C, ...)`` input, per channel, as PyTorch's
    ``SyncBatchNorm`` runs in a process with no process group: over the batch it is given
    (pargraph has no process groups; the statistics of a PyTorch DistributedDataParallel
    program's SyncBatchNorm would be the whole batch's). Programs written for DDP convert
    their layers with :meth:`convert_sync_batchnorm` and run unchanged.

    Examples
    --------
    >>> import pargraph
    >>> model = pargraph.nn.Sequential(pargraph.nn.Linear(3, 4), pargraph.nn.BatchNorm1d(4))
    >>> type(pargraph.nn.SyncBatchNorm.convert_sync_batchnorm(model)[1]).__name__
    'SyncBatchNorm'
    """

    dims = tuple(range(2, 33))

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True,
                 process_group: Any = None, device: Any = None, dtype: Any = None, *,
                 bias: bool = True) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype, bias=bias)
        self.process_group = process_group

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim < 2:
            raise ValueError(f"expected at least 2D input (got {input.ndim}D input)")
        if input.shape[1] == 0:
            raise ValueError("SyncBatchNorm number of input channels should be non-zero")
        return super().forward(input)

    @classmethod
    def convert_sync_batchnorm(cls, module: Module, process_group: Any = None) -> Module:
        """``module`` with each batch normalization layer in it replaced by a
        :class:`SyncBatchNorm` holding the same parameters and running statistics (a new
        layer if ``module`` itself is one), as PyTorch's."""
        converted = module
        if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm):
            converted = cls(module.num_features, module.eps, module.momentum, module.affine,
                            module.track_running_stats, process_group,
                            bias=module.bias is not None)
            if module.affine:
                converted.weight = module.weight
                converted.bias = module.bias
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                setattr(converted, name, getattr(module, name))
            converted.training = module.training
        for name, child in module.named_children():
            converted.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return converted


LazyBatchNorm1d = _lazy_norm(BatchNorm1d)


LazyBatchNorm2d = _lazy_norm(BatchNorm2d)


LazyBatchNorm3d = _lazy_norm(BatchNorm3d)
