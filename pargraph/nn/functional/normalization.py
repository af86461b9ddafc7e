"""``torch.nn.functional``'s normalizations: batch, layer, group, instance, RMS, local response,
and ``normalize``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from pargraph import ops
from pargraph._tensor import Tensor, apply
from pargraph.autograd.mode import no_grad
from pargraph.engine import execution
from pargraph.factories import as_tensor


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
    from pargraph.nn.functional.pooling import avg_pool2d, avg_pool3d
    from pargraph.nn.functional.vision import pad

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


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12,
              out: Tensor | None = None) -> Tensor:
    """``input / max(||input||_p, eps)`` along ``dim``.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.normalize(pargraph.tensor([[3.0, 4.0]])).tolist()
    [[0.6000000238418579, 0.800000011920929]]
    """
    x = as_tensor(input)
    return x / x.norm(p, dim, keepdim=True).clamp(min=eps).expand_as(x)
