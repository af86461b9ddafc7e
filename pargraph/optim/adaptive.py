"""RMSprop, Adagrad and Adadelta (PyTorch's formulas), as composite updates."""

from __future__ import annotations

from pargraph._tensor import Tensor
from pargraph.factories import full_like, zeros_like
from pargraph.optim.optimizer import Optimizer


def _check(**values: float) -> None:
    for name, value in values.items():
        if value < 0:
            raise ValueError(f"Invalid {name} value: {value}")


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
                 weight_decay: float = 0.0, momentum: float = 0.0, centered: bool = False):
        _check(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum)
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                      momentum=momentum, centered=centered))

    def update(self, param: Tensor, grad: Tensor, state: dict, group: dict):
        alpha = group["alpha"]
        if group["weight_decay"]:
            grad = grad + group["weight_decay"] * param
        square_avg = state.get("square_avg")
        square_avg = zeros_like(param) if square_avg is None else square_avg
        square_avg = square_avg * alpha + (1 - alpha) * grad * grad
        new_state = {"step": state.get("step", 0) + 1, "square_avg": square_avg}
        if group["centered"]:
            grad_avg = state.get("grad_avg")
            grad_avg = zeros_like(param) if grad_avg is None else grad_avg
            grad_avg = grad_avg * alpha + (1 - alpha) * grad
            new_state["grad_avg"] = grad_avg
            avg = (square_avg - grad_avg * grad_avg).sqrt() + group["eps"]
        else:
            avg = square_avg.sqrt() + group["eps"]
        if group["momentum"] > 0:
            buf = state.get("momentum_buffer")
            buf = zeros_like(param) if buf is None else buf
            buf = buf * group["momentum"] + grad / avg
            new_state["momentum_buffer"] = buf
            return param - group["lr"] * buf, new_state
        return param - group["lr"] * (grad / avg), new_state


class Adagrad(Optimizer):
    """Adagrad with ``lr_decay``, ``weight_decay``, ``initial_accumulator_value`` and ``eps``.

    Examples
    --------
    >>> import pargraph
    >>> w = pargraph.tensor([1.0], requires_grad=True)
    >>> opt = pargraph.optim.Adagrad([w], lr=0.1)
    >>> (w * 2).sum().backward(); opt.step(); round(w.item(), 4)
    0.9
    """

    name = "adagrad"

    def __init__(self, params, lr: float = 1e-2, lr_decay: float = 0.0,
                 weight_decay: float = 0.0, initial_accumulator_value: float = 0.0,
                 eps: float = 1e-10):
        _check(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay, eps=eps,
               initial_accumulator_value=initial_accumulator_value)
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      eps=eps))

    def update(self, param: Tensor, grad: Tensor, state: dict, group: dict):
        step = state.get("step", 0) + 1
        if group["weight_decay"]:
            grad = grad + group["weight_decay"] * param
        clr = group["lr"] / (1 + (step - 1) * group["lr_decay"])
        total = state.get("sum")
        if total is None:
            total = full_like(param, group["initial_accumulator_value"])
        total = total + grad * grad
        std = total.sqrt() + group["eps"]
        return param - clr * (grad / std), {"step": step, "sum": total}


class Adadelta(Optimizer):
    """Adadelta with ``rho``, ``eps`` and ``weight_decay`` (``lr`` scales the step).

    Examples
    --------
    >>> import pargraph
    >>> w = pargraph.tensor([1.0], requires_grad=True)
    >>> opt = pargraph.optim.Adadelta([w])
    >>> (w * 2).sum().backward(); opt.step(); round(w.item(), 6)
    0.996838
    """

    name = "adadelta"

    def __init__(self, params, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0.0):
        _check(lr=lr, eps=eps, weight_decay=weight_decay)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay))

    def update(self, param: Tensor, grad: Tensor, state: dict, group: dict):
        rho, eps = group["rho"], group["eps"]
        if group["weight_decay"]:
            grad = grad + group["weight_decay"] * param
        square_avg = state.get("square_avg")
        square_avg = zeros_like(param) if square_avg is None else square_avg
        acc_delta = state.get("acc_delta")
        acc_delta = zeros_like(param) if acc_delta is None else acc_delta
        square_avg = square_avg * rho + (1 - rho) * grad * grad
        delta = (acc_delta + eps).sqrt() / (square_avg + eps).sqrt() * grad
        acc_delta = acc_delta * rho + (1 - rho) * delta * delta
        return param - group["lr"] * delta, {"step": state.get("step", 0) + 1,
                                               "square_avg": square_avg,
                                               "acc_delta": acc_delta}
