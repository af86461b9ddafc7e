"""SGD with momentum, dampening, Nesterov momentum and weight decay (PyTorch's formulas)."""

from __future__ import annotations

from pargraph.optim.optimizer import Optimizer, required
from pargraph.tensor import Tensor


class SGD(Optimizer):
    """Stochastic gradient descent.

    Examples
    --------
    >>> import pargraph
    >>> w = pargraph.tensor([1.0], requires_grad=True)
    >>> opt = pargraph.optim.SGD([w], lr=0.1)
    >>> (w * 2).sum().backward(); opt.step(); w
    tensor([0.8000], requires_grad=True)
    """

    name = "sgd"

    def __init__(self, params, lr: float = required, momentum: float = 0.0,
                 dampening: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False):
        if lr is not required and lr < 0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0 or weight_decay < 0:
            raise ValueError(f"Invalid momentum {momentum} or weight_decay {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov))

    def update(self, param: Tensor, grad: Tensor, state: dict, group: dict):
        d_p = grad
        if group["weight_decay"]:
            d_p = d_p + group["weight_decay"] * param
        momentum = group["momentum"]
        if momentum:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = d_p.clone()
            else:
                buf = buf * momentum + (1 - group["dampening"]) * d_p
            state["momentum_buffer"] = buf
            d_p = d_p + momentum * buf if group["nesterov"] else buf
        return param - group["lr"] * d_p, state
