"""Adadelta (PyTorch's formulas: rho)."""

from __future__ import annotations

from pargraph import ops
from pargraph._tensor import Tensor
from pargraph.optim.optimizer import Optimizer, check_nonnegative, implementation, updated


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
