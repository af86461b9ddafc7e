"""RMSprop (PyTorch's formulas: alpha, momentum, centered)."""

from __future__ import annotations

from pargraph import ops
from pargraph._tensor import Tensor
from pargraph.optim.optimizer import Optimizer, check_nonnegative, implementation, updated


class RMSprop(Optimizer):
    """RMSprop with ``alpha``, ``eps``, ``weight_decay``, ``momentum`` and ``centered``.

    Examples
    --------
    >>> import pargraph
    >>> w = pargraph.tensor([1.0], requires_grad=True)
    >>> opt = pargraph.optim.RMSprop([w], lr=0.01)
    >>> (w * 2).sum().backward(); opt.step(); round(w.item(), 4)
    0.9
    """

    name = "rmsprop"

    def __init__(self, params, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0, momentum: float = 0, centered: bool = False,
                 capturable: bool = False, foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False):
        check_nonnegative(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum)
        super().__init__(params, dict(
            lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
            centered=centered, **implementation("RMSprop", capturable=capturable,
                                                foreach=foreach, maximize=maximize,
                                                differentiable=differentiable)))

    def update(self, param: Tensor, grad: Tensor, state: dict, group: dict):
        alpha, decay = group["alpha"], group["weight_decay"]
        square_avg = updated(ops.adam_moment, grad, param, state.get("square_avg"), beta=alpha,
                             weight_decay=decay, square=True)
        new_state = {"step": state.get("step", 0) + 1, "square_avg": square_avg}
        grad_avg = None
        if group["centered"]:
            grad_avg = updated(ops.adam_moment, grad, param, state.get("grad_avg"), beta=alpha,
                               weight_decay=decay, square=False)
            new_state["grad_avg"] = grad_avg
        avg = updated(ops.root_mean_square, square_avg, grad_avg, eps=group["eps"])
        if group["momentum"] > 0:
            buf = updated(ops.rmsprop_buffer, grad, param, avg, state.get("momentum_buffer"),
                          momentum=group["momentum"], weight_decay=decay)
            new_state["momentum_buffer"] = buf
            return updated(ops.scaled_step, param, buf, lr=group["lr"]), new_state
        return updated(ops.rmsprop_step, param, grad, avg, lr=group["lr"],
                       weight_decay=decay), new_state
