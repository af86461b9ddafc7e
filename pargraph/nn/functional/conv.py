"""``torch.nn.functional``'s convolutions (1-3 d, transposed) and sliding blocks (``unfold``,
``fold``), with the argument checks pooling shares."""

from __future__ import annotations

from typing import Any

from pargraph import amp
from pargraph._tensor import Tensor, apply
from pargraph.factories import as_tensor
from pargraph.ops import convolution


def _tuple(value: Any, spatial: int, name: str, op: str) -> tuple[int, ...]:
    if isinstance(value, int):
        return (value,) * spatial
    value = tuple(int(v) for v in value)
    if len(value) == 1:
        return value * spatial
    if len(value) != spatial:
        raise RuntimeError(f"{op}: expected {name} to be a single integer or a tuple of "
                           f"{spatial} integers, got {value}")
    return value


def _batched(input: Tensor, spatial: int, op: str) -> tuple[Tensor, bool]:
    """The input with a batch dimension (PyTorch accepts one unbatched sample too)."""
    if input.ndim == spatial + 1:
        return input.unsqueeze(0), True
    if input.ndim != spatial + 2:
        raise RuntimeError(f"{op}: expected a {spatial + 1}-D (unbatched) or {spatial + 2}-D "
                           f"(batched) input, but got input of size {list(input.shape)}")
    return input, False


def _conv_padding(padding: Any, kernel: tuple, stride: tuple, dilation: tuple,
                  op: str) -> tuple[tuple[int, int], ...]:
    if padding == "valid":
        return ((0, 0),) * len(kernel)
    if padding == "same":
        if any(s != 1 for s in stride):
            raise ValueError(f"{op}: padding='same' is not supported for strided convolutions")
        total = [d * (k - 1) for k, d in zip(kernel, dilation)]
        return tuple((t // 2, t - t // 2) for t in total)
    if isinstance(padding, str):
        raise ValueError(f"{op}: invalid padding string {padding!r}, should be one of "
                         "{'valid', 'same'}")
    return tuple((p, p) for p in _tuple(padding, len(kernel), "padding", op))


def _conv(input: Tensor, weight: Tensor, bias: Tensor | None, stride: Any, padding: Any,
          dilation: Any, groups: int, spatial: int, op: str) -> Tensor:
    input, weight = as_tensor(input), as_tensor(weight)
    x, unbatched = _batched(input, spatial, op)
    stride = _tuple(stride, spatial, "stride", op)
    dilation = _tuple(dilation, spatial, "dilation", op)
    if any(s < 1 for s in stride) or any(d < 1 for d in dilation) or groups < 1:
        raise RuntimeError(f"{op}: stride, dilation and groups must be positive, got "
                           f"stride={stride}, dilation={dilation}, groups={groups}")
    if weight.ndim != spatial + 2:
        raise RuntimeError(f"{op}: expected a {spatial + 2}-D weight (out_channels, "
                           f"in_channels / groups, kernel), got size {list(weight.shape)}")
    pads = _conv_padding(padding, tuple(weight.shape[2:]), stride, dilation, op)
    inputs = (x, weight) + (() if bias is None else (as_tensor(bias),))
    out = apply(convolution.conv, *inputs, stride=stride, padding=pads, dilation=dilation,
                groups=groups)
    return out.squeeze(0) if unbatched else out


@amp.autocasts("lower")
def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    """1-d convolution (cross-correlation) over ``(N, C, L)`` or ``(C, L)`` input.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.conv1d(pargraph.ones(1, 1, 5), pargraph.ones(1, 1, 3)).tolist()
    [[[3.0, 3.0, 3.0]]]
    """
    return _conv(input, weight, bias, stride, padding, dilation, groups, 1, "conv1d")


@amp.autocasts("lower")
def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    """2-d convolution (cross-correlation) over ``(N, C, H, W)`` or ``(C, H, W)`` input.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.conv2d(pargraph.ones(1, 1, 4, 4), pargraph.ones(2, 1, 3, 3), padding=1).shape
    pargraph.Size([1, 2, 4, 4])
    """
    return _conv(input, weight, bias, stride, padding, dilation, groups, 2, "conv2d")


@amp.autocasts("lower")
def conv3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    """3-d convolution over ``(N, C, D, H, W)`` or ``(C, D, H, W)`` input.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.conv3d(pargraph.ones(1, 1, 4, 4, 4), pargraph.ones(2, 1, 3, 3, 3), padding=1).shape
    pargraph.Size([1, 2, 4, 4, 4])
    """
    return _conv(input, weight, bias, stride, padding, dilation, groups, 3, "conv3d")


def _conv_transpose(input: Tensor, weight: Tensor, bias: Tensor | None, stride: Any,
                    padding: Any, output_padding: Any, groups: int, dilation: Any,
                    spatial: int, op: str) -> Tensor:
    """The transpose of convolution (the gradient of ``conv`` with respect to its input):
    ``weight`` is ``(in_channels, out_channels / groups, kernel...)``."""
    input, weight = as_tensor(input), as_tensor(weight)
    x, unbatched = _batched(input, spatial, op)
    stride, dilation = (_tuple(v, spatial, name, op) for v, name in
                        ((stride, "stride"), (dilation, "dilation")))
    padding = _tuple(padding, spatial, "padding", op)
    output_padding = _tuple(output_padding, spatial, "output_padding", op)
    if any(s < 1 for s in stride) or any(d < 1 for d in dilation) or groups < 1:
        raise RuntimeError(f"{op}: stride, dilation and groups must be positive, got "
                           f"stride={stride}, dilation={dilation}, groups={groups}")
    if weight.ndim != spatial + 2:
        raise RuntimeError(f"{op}: expected a {spatial + 2}-D weight (in_channels, "
                           f"out_channels / groups, kernel), got size {list(weight.shape)}")
    if x.shape[1] != weight.shape[0]:
        raise RuntimeError(f"{op}: Given transposed=1, weight of size {list(weight.shape)}, "
                           f"expected input{list(x.shape)} to have {weight.shape[0]} channels, "
                           f"but got {x.shape[1]} channels instead")
    if any(o >= s and o >= d for o, s, d in zip(output_padding, stride, dilation)):
        raise RuntimeError(f"{op}: output padding must be smaller than either stride or "
                           f"dilation, but got output_padding={output_padding}, "
                           f"stride={stride}, dilation={dilation}")
    kernel = weight.shape[2:]
    size = tuple((n - 1) * s - 2 * p + d * (k - 1) + o + 1 for n, s, p, d, k, o in
                 zip(x.shape[2:], stride, padding, dilation, kernel, output_padding))
    if any(n < 1 for n in size):
        raise RuntimeError(f"{op}: the output size {size} is too small for input of shape "
                           f"{tuple(x.shape)}")
    out = apply(convolution.conv_input_grad, x, weight,
                input_shape=(x.shape[0], weight.shape[1] * groups) + size, stride=stride,
                padding=tuple((p, p) for p in padding), dilation=dilation, groups=groups)
    if bias is not None:
        out = out + as_tensor(bias).reshape(-1, *([1] * spatial))
    return out.squeeze(0) if unbatched else out


@amp.autocasts("lower")
def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None,
                     stride: Any = 1, padding: Any = 0, output_padding: Any = 0,
                     groups: int = 1, dilation: Any = 1) -> Tensor:
    """1-d transposed convolution ("deconvolution") over ``(N, C, L)`` or ``(C, L)`` input.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.conv_transpose1d(pargraph.ones(1, 1, 3), pargraph.ones(1, 1, 2)).tolist()
    [[[1.0, 2.0, 2.0, 1.0]]]
    """
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups,
                           dilation, 1, "conv_transpose1d")


@amp.autocasts("lower")
def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None,
                     stride: Any = 1, padding: Any = 0, output_padding: Any = 0,
                     groups: int = 1, dilation: Any = 1) -> Tensor:
    """2-d transposed convolution over ``(N, C, H, W)`` or ``(C, H, W)`` input (DCGAN's
    generator).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.conv_transpose2d(pargraph.ones(1, 4, 3, 3), pargraph.ones(4, 2, 4, 4), stride=2,
    ...                    padding=1).shape
    pargraph.Size([1, 2, 6, 6])
    """
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups,
                           dilation, 2, "conv_transpose2d")


@amp.autocasts("lower")
def conv_transpose3d(input: Tensor, weight: Tensor, bias: Tensor | None = None,
                     stride: Any = 1, padding: Any = 0, output_padding: Any = 0,
                     groups: int = 1, dilation: Any = 1) -> Tensor:
    """3-d transposed convolution over ``(N, C, D, H, W)`` or ``(C, D, H, W)`` input.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.conv_transpose3d(pargraph.ones(1, 4, 2, 2, 2), pargraph.ones(4, 2, 2, 2, 2),
    ...                    stride=2).shape
    pargraph.Size([1, 2, 4, 4, 4])
    """
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups,
                           dilation, 3, "conv_transpose3d")


def _block_args(kernel_size: Any, dilation: Any, padding: Any, stride: Any,
                op: str) -> dict:
    return {"kernel": _tuple(kernel_size, 2, "kernel_size", op),
            "dilation": _tuple(dilation, 2, "dilation", op),
            "padding": tuple((p, p) for p in _tuple(padding, 2, "padding", op)),
            "stride": _tuple(stride, 2, "stride", op)}


def unfold(input: Tensor, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
           stride: Any = 1) -> Tensor:
    """Every sliding block of ``(N, C, H, W)`` (or ``(C, H, W)``) input as a column:
    ``(N, C * kh * kw, blocks)`` (im2col).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.unfold(pargraph.arange(16.0).reshape(1, 1, 4, 4), 2, stride=2)[0, :, 0].tolist()
    [0.0, 1.0, 4.0, 5.0]
    """
    input = as_tensor(input)
    if input.ndim not in (3, 4):
        raise RuntimeError(f"unfold: Expected 3D or 4D (batch mode) tensor with possibly 0 "
                           f"batch size and other non-zero dimensions for input, but got: "
                           f"{list(input.shape)}")
    x = input if input.ndim == 4 else input.unsqueeze(0)
    out = apply(convolution.unfold, x, **_block_args(kernel_size, dilation, padding, stride,
                                                       "unfold"))
    return out if input.ndim == 4 else out.squeeze(0)


def fold(input: Tensor, output_size: Any, kernel_size: Any, dilation: Any = 1,
         padding: Any = 0, stride: Any = 1) -> Tensor:
    """Columns ``(N, C * kh * kw, blocks)`` (or unbatched) summed back into ``(N, C,
    *output_size)`` where their blocks overlap (col2im; :func:`unfold`'s adjoint).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.fold(pargraph.ones(1, 4, 4), (3, 3), 2)[0, 0].tolist()
    [[1.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 1.0]]
    """
    input = as_tensor(input)
    if input.ndim not in (2, 3):
        raise RuntimeError(f"fold: Expected 2D or 3D (batch mode) input tensor with possibly "
                           f"0 batch size and non-zero dimensions for input, but got: "
                           f"{list(input.shape)}")
    x = input if input.ndim == 3 else input.unsqueeze(0)
    out = apply(convolution.fold, x, output_size=_tuple(output_size, 2, "output_size", "fold"),
                **_block_args(kernel_size, dilation, padding, stride, "fold"))
    return out if input.ndim == 3 else out.squeeze(0)
