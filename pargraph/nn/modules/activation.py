"""Activation layers (PyTorch's ``torch.nn.modules.activation``), ``MultiheadAttention`` among
them as there."""

from __future__ import annotations

from typing import Any

from pargraph._tensor import Tensor
from pargraph.devices import check_device
from pargraph.factories import (
    empty_for_init,
    zeros,
)
from pargraph.nn import functional as F
from pargraph.nn import init
from pargraph.nn import init as nn_init
from pargraph.nn.functional.activation import (
    celu,
    elu,
    gelu,
    glu,
    hardshrink,
    hardsigmoid,
    hardswish,
    hardtanh,
    logsigmoid,
    mish,
    prelu,
    relu6,
    rrelu,
    selu,
    softmin,
    softshrink,
    softsign,
    tanhshrink,
    threshold,
)
from pargraph.nn.module import Module, Parameter
from pargraph.nn.modules.linear import NonDynamicallyQuantizableLinear


class _Elementwise(Module):
    """An activation module that calls its function with its arguments."""

    function = staticmethod(elu)
    arguments: tuple[str, ...] = ()
    #: PyTorch's ``inplace``, for the functions that take it (None: the function has none).
    inplace: bool | None = None

    def forward(self, input: Tensor) -> Tensor:
        arguments = (getattr(self, a) for a in self.arguments)
        if self.inplace is None:
            return type(self).function(input, *arguments)
        return type(self).function(input, *arguments, inplace=self.inplace)

    def extra_repr(self) -> str:
        return ", ".join([f"{a}={getattr(self, a)}" for a in self.arguments]
                         + (["inplace=True"] if self.inplace else []))


class ELU(_Elementwise):
    """:func:`elu` as a module.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.ELU()(pargraph.tensor([2.0])).tolist()
    [2.0]
    """

    function, arguments = staticmethod(elu), ("alpha",)

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace
        self.alpha = alpha


class CELU(_Elementwise):
    """:func:`celu` as a module.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.CELU()(pargraph.tensor([2.0])).tolist()
    [2.0]
    """

    function, arguments = staticmethod(celu), ("alpha",)

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace
        self.alpha = alpha


class SELU(_Elementwise):
    """:func:`selu` as a module.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.SELU()(pargraph.tensor([0.0])).tolist()
    [0.0]
    """

    function = staticmethod(selu)

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace


class GLU(_Elementwise):
    """:func:`glu` as a module.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.GLU()(pargraph.tensor([2.0, 0.0])).tolist()
    [1.0]
    """

    function, arguments = staticmethod(glu), ("dim",)

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim


class LogSigmoid(_Elementwise):
    """:func:`logsigmoid` as a module.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.LogSigmoid()(pargraph.tensor([0.0])).tolist()
    [-0.6931471824645996]
    """

    function = staticmethod(logsigmoid)


class Mish(_Elementwise):
    """:func:`mish` as a module.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Mish()(pargraph.tensor([0.0])).tolist()
    [0.0]
    """

    function = staticmethod(mish)

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace


class Hardsigmoid(_Elementwise):
    """:func:`hardsigmoid` as a module.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Hardsigmoid()(pargraph.tensor([3.0])).tolist()
    [1.0]
    """

    function = staticmethod(hardsigmoid)

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def extra_repr(self) -> str:
        return ""  # PyTorch's shows no inplace for this one


class Hardswish(_Elementwise):
    """:func:`hardswish` as a module.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Hardswish()(pargraph.tensor([3.0])).tolist()
    [3.0]
    """

    function = staticmethod(hardswish)

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def extra_repr(self) -> str:
        return ""  # PyTorch's shows no inplace for this one


class ReLU6(_Elementwise):
    """:func:`relu6` as a module.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.ReLU6()(pargraph.tensor([7.0])).tolist()
    [6.0]
    """

    function = staticmethod(relu6)

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace


class Softsign(_Elementwise):
    """:func:`softsign` as a module.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Softsign()(pargraph.tensor([3.0])).tolist()
    [0.75]
    """

    function = staticmethod(softsign)


class Tanhshrink(_Elementwise):
    """:func:`tanhshrink` as a module.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Tanhshrink()(pargraph.tensor([0.0])).tolist()
    [0.0]
    """

    function = staticmethod(tanhshrink)


class Hardtanh(_Elementwise):
    """:func:`hardtanh` as a module.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Hardtanh(-2.0, 2.0)(pargraph.tensor([5.0])).tolist()
    [2.0]
    """

    function, arguments = staticmethod(hardtanh), ("min_val", "max_val")

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0,
                 inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace
        if min_val > max_val:
            raise ValueError("min_val cannot be greater than max_val")
        self.min_val, self.max_val = min_val, max_val


class Softmin(_Elementwise):
    """:func:`softmin` as a module.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Softmin(dim=0)(pargraph.tensor([1.0, 1.0])).tolist()
    [0.5, 0.5]
    """

    function, arguments = staticmethod(softmin), ("dim",)

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim


class Softshrink(_Elementwise):
    """:func:`softshrink` as a module.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Softshrink(1.0)(pargraph.tensor([3.0])).tolist()
    [2.0]
    """

    function, arguments = staticmethod(softshrink), ("lambd",)

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd


class Hardshrink(_Elementwise):
    """:func:`hardshrink` as a module.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Hardshrink(1.0)(pargraph.tensor([0.5, 3.0])).tolist()
    [0.0, 3.0]
    """

    function, arguments = staticmethod(hardshrink), ("lambd",)

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd


class Threshold(_Elementwise):
    """:func:`threshold` as a module.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Threshold(1.0, 0.0)(pargraph.tensor([0.5, 3.0])).tolist()
    [0.0, 3.0]
    """

    function, arguments = staticmethod(threshold), ("threshold", "value")

    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace
        self.threshold, self.value = threshold, value


class RReLU(Module):
    """:func:`rrelu` as a module: random slopes in training, their mean in eval.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.RReLU(0.1, 0.3).eval()(pargraph.tensor([-1.0])).tolist()
    [-0.20000000298023224]
    """

    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
                 inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace
        self.lower, self.upper = lower, upper

    def forward(self, input: Tensor) -> Tensor:
        return rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace
                                                             else "")


class PReLU(Module):
    """:func:`prelu` with a learned slope: one, or one per channel (``num_parameters``).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.PReLU()(pargraph.tensor([-4.0])).tolist()
    [-1.0]
    """

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.num_parameters, self.init = num_parameters, init
        self.weight = Parameter(zeros(num_parameters))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn_init.constant_(self.weight, self.init)

    def forward(self, input: Tensor) -> Tensor:
        return prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


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


class MultiheadAttention(Module):
    """Multi-head attention (``batch_first``; ``key_padding_mask`` and ``attn_mask`` with
    PyTorch's convention: bool True is *not* attended, float is added), returning the output
    and the attention weights (averaged over heads unless ``average_attn_weights=False``).

    Examples
    --------
    >>> import pargraph
    >>> mha = pargraph.nn.MultiheadAttention(16, 4, batch_first=True)
    >>> out, weights = mha(*[pargraph.randn(2, 5, 16)] * 3)
    >>> out.shape, weights.shape
    (pargraph.Size([2, 5, 16]), pargraph.Size([2, 5, 5]))
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False,
                 kdim: int | None = None, vdim: int | None = None, batch_first: bool = False,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        check_device(device, "MultiheadAttention")
        if embed_dim % num_heads:
            raise AssertionError("embed_dim must be divisible by num_heads")
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.kdim = embed_dim if kdim is None else kdim
        self.vdim = embed_dim if vdim is None else vdim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.head_dim, self.batch_first = embed_dim // num_heads, batch_first
        # PyTorch's parameters, in its order: one packed projection, or one per input when
        # the keys or values have their own sizes.
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(empty_for_init(3 * embed_dim, embed_dim))
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = Parameter(empty_for_init(embed_dim, embed_dim))
            self.k_proj_weight = Parameter(empty_for_init(embed_dim, self.kdim))
            self.v_proj_weight = Parameter(empty_for_init(embed_dim, self.vdim))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(zeros(3 * embed_dim))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias)
        if add_bias_kv:
            self.bias_k = Parameter(empty_for_init(1, 1, embed_dim))
            self.bias_v = Parameter(empty_for_init(1, 1, embed_dim))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        for weight in (self.in_proj_weight, self.q_proj_weight, self.k_proj_weight,
                       self.v_proj_weight):
            if weight is not None:
                init.xavier_uniform_(weight)
        if bias:
            init.zeros_(self.out_proj.bias)
        if add_bias_kv:
            init.xavier_normal_(self.bias_k)
            init.xavier_normal_(self.bias_v)
        if dtype is not None:
            self.to(dtype)

    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                key_padding_mask: Tensor | None = None, need_weights: bool = True,
                attn_mask: Tensor | None = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
        if query.shape[-1] != self.embed_dim:
            raise AssertionError(f"{self.describe()}: was expecting embedding dimension of "
                                 f"{self.embed_dim}, but got {query.shape[-1]}")
        return F.multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight,
            self.in_proj_bias, self.bias_k, self.bias_v, self.add_zero_attn, self.dropout,
            self.out_proj.weight, self.out_proj.bias, training=self.training,
            key_padding_mask=key_padding_mask, need_weights=need_weights, attn_mask=attn_mask,
            use_separate_proj_weight=self.in_proj_weight is None,
            q_proj_weight=self.q_proj_weight, k_proj_weight=self.k_proj_weight,
            v_proj_weight=self.v_proj_weight, average_attn_weights=average_attn_weights,
            is_causal=is_causal, _batch_first=self.batch_first)
