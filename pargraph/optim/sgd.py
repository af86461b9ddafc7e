"""SGD with momentum, dampening, Nesterov momentum and weight decay (PyTorch's formulas)."""

from __future__ import annotations

from pargraph import ops
from pargraph._tensor import Tensor
from pargraph.optim.optimizer import Optimizer, implementation, updated


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

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0,
                 dampening: float = 0, weight_decay: float = 0, nesterov: bool = False, *,
                 maximize: bool = False, foreach: bool | None = None,
                 differentiable: bool = False, fused: bool | None = None):
        if lr < 0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0 or weight_decay < 0:
            raise ValueError(f"Invalid momentum {momentum} or weight_decay {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(
            lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
            nesterov=nesterov, **implementation("SGD", maximize=maximize, foreach=foreach,
                                                differentiable=differentiable, fused=fused)))

    def update(self, param: Tensor, grad: Tensor, state: dict, group: dict):
        decay, momentum = group["weight_decay"], group["momentum"]
        buf = None
        if momentum:
            buf = updated(ops.momentum_buffer, grad, param, state.get("momentum_buffer"),
                          momentum=momentum, dampening=group["dampening"], weight_decay=decay)
            state["momentum_buffer"] = buf
        new_param = updated(ops.sgd_step, param, grad, buf, lr=group["lr"], momentum=momentum,
                            weight_decay=decay, nesterov=group["nesterov"])
        return new_param, state
