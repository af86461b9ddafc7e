"""RMSprop, Adagrad and Adadelta (PyTorch's formulas): one node per tensor and formula, as
SGD's and Adam's (their hyperparameters are the nodes' attributes)."""

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

    def __init__(self, params, lr: float = 1e-2, lr_decay: float = 0,
                 weight_decay: float = 0, initial_accumulator_value: float = 0,
                 eps: float = 1e-10, foreach: bool | None = None, *, maximize: bool = False,
                 differentiable: bool = False, fused: bool | None = None):
        check_nonnegative(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay, eps=eps,
               initial_accumulator_value=initial_accumulator_value)
        super().__init__(params, dict(
            lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
            initial_accumulator_value=initial_accumulator_value, eps=eps,
            **implementation("Adagrad", foreach=foreach, maximize=maximize,
                             differentiable=differentiable, fused=fused)))

    def update(self, param: Tensor, grad: Tensor, state: dict, group: dict):
        step = state.get("step", 0) + 1
        decay = group["weight_decay"]
        clr = group["lr"] / (1 + (step - 1) * group["lr_decay"])
        total = updated(ops.adagrad_sum, grad, param, state.get("sum"), weight_decay=decay,
                        initial=group["initial_accumulator_value"])
        new_param = updated(ops.adagrad_step, param, grad, total, lr=clr, eps=group["eps"],
                            weight_decay=decay)
        return new_param, {"step": step, "sum": total}


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
                 weight_decay: float = 0, foreach: bool | None = None, *,
                 capturable: bool = False, maximize: bool = False,
                 differentiable: bool = False):
        check_nonnegative(lr=lr, eps=eps, weight_decay=weight_decay)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        super().__init__(params, dict(
            lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
            **implementation("Adadelta", foreach=foreach, capturable=capturable,
                             maximize=maximize, differentiable=differentiable)))

    def update(self, param: Tensor, grad: Tensor, state: dict, group: dict):
        rho, decay = group["rho"], group["weight_decay"]
        square_avg = updated(ops.adam_moment, grad, param, state.get("square_avg"), beta=rho,
                             weight_decay=decay, square=True)
        delta = updated(ops.adadelta_delta, grad, param, square_avg, state.get("acc_delta"),
                        eps=group["eps"], weight_decay=decay)
        acc_delta = updated(ops.adam_moment, delta, param, state.get("acc_delta"), beta=rho,
                            weight_decay=0.0, square=True)
        return updated(ops.scaled_step, param, delta, lr=group["lr"]), {
            "step": state.get("step", 0) + 1, "square_avg": square_avg, "acc_delta": acc_delta}
