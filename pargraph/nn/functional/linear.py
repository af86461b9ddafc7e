"""``torch.nn.functional``'s linear and bilinear maps."""

from __future__ import annotations

from pargraph import amp, ops
from pargraph._tensor import Tensor, apply
from pargraph.factories import as_tensor
from pargraph.functions import einsum


@amp.autocasts("lower")
def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """x @ weight.T + bias.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.linear(pargraph.ones(1, 2), pargraph.ones(3, 2), pargraph.zeros(3))
    tensor([[2., 2., 2.]])
    """
    return apply(ops.linear, input, weight, *(() if bias is None else (bias,)))


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor,
             bias: Tensor | None = None) -> Tensor:
    """y_o = x1 @ weight[o] @ x2 + bias_o over the last dimensions (any leading ones shared).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.bilinear(pargraph.ones(1, 2), pargraph.ones(1, 3), pargraph.ones(4, 2, 3)).tolist()
    [[6.0, 6.0, 6.0, 6.0]]
    """
    input1, input2, weight = as_tensor(input1), as_tensor(input2), as_tensor(weight)
    if weight.ndim != 3:
        raise RuntimeError(f"bilinear(): weight must be 3-D, got {weight.ndim}-D")
    if input1.shape[:-1] != input2.shape[:-1]:
        raise RuntimeError(f"bilinear(): input batch dimensions do not match: got "
                           f"{tuple(input1.shape[:-1])} and {tuple(input2.shape[:-1])}")
    if input1.shape[-1] != weight.shape[1] or input2.shape[-1] != weight.shape[2]:
        raise RuntimeError(f"bilinear(): input sizes ({input1.shape[-1]}, {input2.shape[-1]}) "
                           f"do not match the weight's ({weight.shape[1]}, {weight.shape[2]})")
    out = einsum("...i,oij,...j->...o", input1, weight, input2)
    return out if bias is None else out + bias
