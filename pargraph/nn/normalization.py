"""Normalization, embeddings and GELU: the functions (``nn.functional.layer_norm`` & co.,
composed of pargraph ops) and their modules, with PyTorch's arguments, defaults and checks.

Batch normalization updates its running statistics the way PyTorch does (in place, without
gradient), and hands the new values to the next run (``execution.defer``) so that a training
loop computes them in the step's own run instead of chaining them across steps.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from pargraph import execution, ops
from pargraph._tensor import Tensor, apply, int64
from pargraph.autograd.mode import no_grad
from pargraph.devices import check_device
from pargraph.factories import as_tensor, empty_for_init, ones, zeros
from pargraph.functions import where
from pargraph.nn import init
from pargraph.nn.module import Module, Parameter


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """``x * Phi(x)``, Phi the standard normal CDF (``approximate="tanh"``: its tanh fit).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.gelu(pargraph.tensor([-1.0, 0.0, 2.0]))
    tensor([-0.1587,  0.0000,  1.9545])
    """
    if approximate not in ("none", "tanh"):
        raise RuntimeError(f"approximate argument must be either none or tanh, got "
                           f"{approximate!r}")
    return apply(ops.gelu, as_tensor(input), approximate=approximate)


def layer_norm(input: Tensor, normalized_shape: Sequence[int], weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalize over the last ``len(normalized_shape)`` dimensions (mean 0, variance 1),
    then scale by ``weight`` and shift by ``bias``.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.layer_norm(pargraph.tensor([[1.0, 3.0]]), (2,))
    tensor([[-1.0000,  1.0000]])
    """
    input = as_tensor(input)
    dims = _trailing_dims(input, normalized_shape)
    half = input.dtype == ops.HALF  # computed in float32 and rounded once, as PyTorch does
    x = input.float() if half else input
    centered = x - x.mean(dims, keepdim=True)
    out = centered * ((centered * centered).mean(dims, keepdim=True) + eps).rsqrt()
    if weight is not None:
        out = out * (weight.float() if half and weight.dtype == ops.HALF else weight)
    if bias is not None:
        out = out + (bias.float() if half and bias.dtype == ops.HALF else bias)
    if half:
        out = out.half()
    return apply(ops.shown_as, out, "NativeLayerNormBackward0")


def _as_shape(normalized_shape: Any) -> tuple[int, ...]:
    return (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)


def _affine_parameters(module: Module, shape: tuple[int, ...], affine: bool,
                       bias: bool | None) -> None:
    """A norm's learned scale (ones) and shift (zeros) of ``shape``, or ``None`` where there
    is none (``bias=None``: the norm has no shift at all, as RMSNorm)."""
    module.register_parameter("weight", Parameter(ones(*shape)) if affine else None)
    if bias is not None:
        module.register_parameter("bias", Parameter(zeros(*shape)) if affine and bias else None)


def _trailing_dims(input: Tensor, normalized_shape: Any) -> tuple[int, ...]:
    """The trailing dimensions ``normalized_shape`` names (negative), checked as PyTorch's
    ``layer_norm`` and ``rms_norm`` check them."""
    shape = _as_shape(normalized_shape)
    if not shape or input.ndim < len(shape) or \
            tuple(input.shape[input.ndim - len(shape):]) != shape:
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape "
                           f"[*, {', '.join(map(str, shape))}], but got input of size"
                           f"{list(input.shape)}")
    return tuple(range(-len(shape), 0))


def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = None, bias: Tensor | None = None,
               training: bool = False, momentum: float | Tensor = 0.1,
               eps: float = 1e-5) -> Tensor:
    """Normalize each channel (dimension 1) over the batch and spatial dimensions: with the
    batch's statistics when ``training`` (updating the running ones in place, the variance
    unbiased), else with the running statistics.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.batch_norm(pargraph.tensor([[1.0], [3.0]]), None, None, training=True)
    tensor([[-1.0000],
            [ 1.0000]])
    """
    input = as_tensor(input)
    if input.ndim < 2:
        raise ValueError(f"batch_norm: expected 2-D or more input (N, C, ...), got "
                         f"{input.ndim}-D input")
    dims = (0,) + tuple(range(2, input.ndim))
    channels = (1, input.shape[1]) + (1,) * (input.ndim - 2)
    if training:
        count = input.numel() // input.shape[1]
        if count <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got "
                             f"input size {input.shape}")
        mean = input.mean(dims, keepdim=True)
        centered = input - mean
        var = (centered * centered).mean(dims, keepdim=True)
        if running_mean is not None or running_var is not None:
            _update_running(running_mean, running_var, mean, var * (count / (count - 1)),
                            momentum)
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("batch_norm: running_mean and running_var must be given when "
                               "not training")
        centered = input - running_mean.reshape(channels)
        var = running_var.reshape(channels)
    out = centered * (var + eps).rsqrt()
    if weight is not None:
        out = out * weight.reshape(channels)
    if bias is not None:
        out = out + bias.reshape(channels)
    return apply(ops.shown_as, out, "NativeBatchNormBackward0")


def local_response_norm(input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75,
                        k: float = 1.0) -> Tensor:
    """Each value over ``(k + alpha * mean of the squares of the size channels around it)^beta``
    (AlexNet's normalization across channels).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.local_response_norm(pargraph.ones(1, 4, 2, 2), 2).shape
    pargraph.Size([1, 4, 2, 2])
    """
    from pargraph.nn.spatial import avg_pool2d, avg_pool3d, pad

    input = as_tensor(input)
    if input.ndim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {input.ndim} "
                         f"dimensions)")
    if input.numel() == 0:
        return input
    squares = input * input
    if input.ndim == 3:
        padded = pad(squares.unsqueeze(1), (0, 0, size // 2, (size - 1) // 2))
        mean = avg_pool2d(padded, (size, 1), stride=1).squeeze(1)
    else:
        shape = tuple(input.shape)
        volume = squares.reshape(shape[0], 1, shape[1], shape[2], -1)
        padded = pad(volume, (0, 0, 0, 0, size // 2, (size - 1) // 2))
        mean = avg_pool3d(padded, (size, 1, 1), stride=1).squeeze(1).reshape(shape)
    return input / (mean * alpha + k) ** beta


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalize ``(N, C, ...)`` input over each group of ``C / num_groups`` channels (and the
    spatial dimensions), then scale and shift each channel.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.group_norm(pargraph.tensor([[1.0, 3.0, 5.0, 9.0]]), 2)
    tensor([[-1.0000,  1.0000, -1.0000,  1.0000]])
    """
    input = as_tensor(input)
    if input.ndim < 2 or input.shape[1] % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by "
                           f"num_groups, but got input of shape {list(input.shape)} and "
                           f"num_groups={num_groups}")
    grouped = input.reshape(input.shape[0], num_groups, -1)
    centered = grouped - grouped.mean(-1, keepdim=True)
    out = (centered * ((centered * centered).mean(-1, keepdim=True) + eps).rsqrt()) \
        .reshape(*input.shape)
    channels = (1, input.shape[1]) + (1,) * (input.ndim - 2)
    if weight is not None:
        out = out * weight.reshape(channels)
    if bias is not None:
        out = out + bias.reshape(channels)
    return apply(ops.shown_as, out, "NativeGroupNormBackward0")


def instance_norm(input: Tensor, running_mean: Tensor | None = None,
                  running_var: Tensor | None = None, weight: Tensor | None = None,
                  bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalize each channel of each sample of ``(N, C, ...)`` input over its spatial
    dimensions (``use_input_stats``, updating running statistics averaged over the batch when
    given), or with the running statistics.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.instance_norm(pargraph.tensor([[[1.0, 3.0], [0.0, 4.0]]]))
    tensor([[[-1.0000,  1.0000],
             [-1.0000,  1.0000]]])
    """
    input = as_tensor(input)
    if input.ndim < 3:
        raise ValueError(f"instance_norm: expected 3-D or more input (N, C, ...), got "
                         f"{input.ndim}-D input")
    dims = tuple(range(2, input.ndim))
    channels = (1, input.shape[1]) + (1,) * (input.ndim - 2)
    if use_input_stats:
        mean = input.mean(dims, keepdim=True)
        centered = input - mean
        var = (centered * centered).mean(dims, keepdim=True)
        if running_mean is not None or running_var is not None:
            count = math.prod(input.shape[2:])
            _update_running(running_mean, running_var, mean.mean(0),
                            (var * (count / max(count - 1, 1))).mean(0), momentum)
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("instance_norm: running_mean and running_var must be given "
                               "when use_input_stats is False")
        centered = input - running_mean.reshape(channels)
        var = running_var.reshape(channels)
    out = centered * (var + eps).rsqrt()
    if weight is not None:
        out = out * weight.reshape(channels)
    if bias is not None:
        out = out + bias.reshape(channels)
    return out


def rms_norm(input: Tensor, normalized_shape: Sequence[int], weight: Tensor | None = None,
             eps: float | None = None) -> Tensor:
    """Divide by the root mean square over the trailing ``normalized_shape`` dimensions
    (``eps`` by default the dtype's machine epsilon), then scale by ``weight``.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.rms_norm(pargraph.tensor([[3.0, 4.0]]), (2,), eps=0.0)
    tensor([[0.8485, 1.1314]])
    """
    input = as_tensor(input)
    dims = _trailing_dims(input, normalized_shape)
    eps = float(np.finfo(input.dtype).eps) if eps is None else eps
    out = input * ((input * input).mean(dims, keepdim=True) + eps).rsqrt()
    return out * weight if weight is not None else out


def _update_running(running_mean: Tensor | None, running_var: Tensor | None, mean: Tensor,
                    unbiased_var: Tensor, momentum: float | Tensor) -> None:
    with no_grad():
        for running, batch in ((running_mean, mean), (running_var, unbiased_var)):
            if running is not None:
                replaced = running._node
                # One rebind of the new value, not mul_ then add_: a thread reading the
                # buffer between the two saw a value the module never had.
                running._rebind((running * (1 - momentum)
                                 + batch.reshape(running.shape) * momentum)._node)
                execution.defer([running._node], state=True, replaces=[replaced])


def _renormalized(weight: Tensor, indices: Tensor, max_norm: float, norm_type: float) -> None:
    """Scale the rows of ``weight`` at ``indices`` whose norm exceeds ``max_norm`` by
    ``max_norm / (norm + 1e-7)`` (in float64, as PyTorch's), in place and untracked."""
    with no_grad():
        used = zeros(weight.shape[0], dtype=bool)
        used[indices.reshape(-1)] = True
        norms = weight.norm(p=norm_type, dim=1).double()
        scale = where(used & (norms > max_norm), max_norm / (norms + 1e-7), 1.0)
        weight.mul_(scale.to(weight.dtype).unsqueeze(1))


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None,
              max_norm: float | None = None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """The rows of ``weight`` at the integer ``input``; rows at ``padding_idx`` get no gradient.
    With ``max_norm``, the rows looked up whose ``norm_type``-norm exceeds it are first scaled
    down to it in ``weight`` itself, as PyTorch's ``embedding_renorm_``.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.embedding(pargraph.tensor([2, 0]), pargraph.eye(3)).tolist()
    [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
    """
    for name, value in (("scale_grad_by_freq", scale_grad_by_freq), ("sparse", sparse)):
        if value:
            raise NotImplementedError(f"embedding: {name}={value!r} is not supported")
    input, weight = as_tensor(input), as_tensor(weight)
    if input.dtype.kind not in "iu":
        raise RuntimeError(f"Expected tensor for argument #1 'indices' to have one of the "
                           f"following scalar types: Long, Int; but got {input.dtype} instead")
    if weight.ndim != 2:
        raise RuntimeError(f"'weight' must be 2-D, got {weight.ndim}-D")
    checked = ops.checked_index(input._node, weight.shape[0], "IndexError",
                                "index out of range in self", "embedding")
    if max_norm is not None:
        _renormalized(weight, Tensor(checked), float(max_norm), float(norm_type))
    out = weight[Tensor(checked)]
    if padding_idx is not None:
        padding_idx = ops.normalize_dim(padding_idx, weight.shape[0])
        out = where((input != padding_idx).unsqueeze(-1), out, out.detach())
    return apply(ops.shown_as, out, "EmbeddingBackward0")


class GELU(Module):
    """The GELU activation (``approximate``: ``"none"`` or ``"tanh"``).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.GELU()(pargraph.zeros(2))
    tensor([0., 0.])
    """

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        return gelu(input, self.approximate)

    def extra_repr(self) -> str:
        return f"approximate='{self.approximate}'"


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


class Embedding(Module):
    """A table of ``num_embeddings`` vectors looked up by integer index (initialized N(0, 1);
    the ``padding_idx`` row starts at zero and gets no gradient).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Embedding(10, 3)(pargraph.tensor([[1, 2], [4, 9]])).shape
    pargraph.Size([2, 2, 3])
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 max_norm: float | None = None, norm_type: float = 2.0,
                 scale_grad_by_freq: bool = False, sparse: bool = False,
                 _weight: Tensor | None = None, _freeze: bool = False, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        check_device(device, "Embedding")
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise AssertionError("Padding_idx must be within num_embeddings")
            padding_idx %= num_embeddings
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx, self.max_norm, self.sparse = padding_idx, max_norm, sparse
        self.norm_type, self.scale_grad_by_freq = norm_type, scale_grad_by_freq
        if _weight is None:
            self.weight = Parameter(empty_for_init(num_embeddings, embedding_dim))
            self.reset_parameters()
        else:
            self.weight = Parameter(_weight, requires_grad=not _freeze)
        if dtype is not None:
            self.to(dtype)

    @classmethod
    def from_pretrained(cls, embeddings: Tensor, freeze: bool = True,
                        padding_idx: int | None = None, max_norm: float | None = None,
                        norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                        sparse: bool = False) -> Embedding:
        """An Embedding holding the 2-D ``embeddings`` (not trained when ``freeze``).

        Examples
        --------
        >>> import pargraph
        >>> table = pargraph.nn.Embedding.from_pretrained(pargraph.eye(3))
        >>> table(pargraph.tensor([2])).tolist(), table.weight.requires_grad
        ([[0.0, 0.0, 1.0]], False)
        """
        if embeddings.ndim != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        rows, dim = embeddings.shape
        return cls(rows, dim, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse,
                   _weight=embeddings, _freeze=freeze)

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx] = 0.0

    def forward(self, input: Tensor) -> Tensor:
        return embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                         scale_grad_by_freq=self.scale_grad_by_freq, sparse=self.sparse)

    def extra_repr(self) -> str:
        text = f"{self.num_embeddings}, {self.embedding_dim}"
        return text + (f", padding_idx={self.padding_idx}" if self.padding_idx is not None
                       else "")
