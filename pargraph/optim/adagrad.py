"""Adagrad (PyTorch's formulas: lr_decay, initial_accumulator_value)."""

from __future__ import annotations

from pargraph import ops
from pargraph._tensor import Tensor
from pargraph.optim.optimizer import Optimizer, check_nonnegative, implementation, updated


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
