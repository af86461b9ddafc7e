"""Adamax: Adam with the infinity norm (PyTorch's formulas)."""

from __future__ import annotations

from pargraph._tensor import Tensor
from pargraph.optim.adam import check_betas
from pargraph.optim.optimizer import Optimizer, check_nonnegative, implementation


class Adamax(Optimizer):
    """Adam with the infinity norm in place of the second moment.

    Examples
    --------
    >>> import pargraph
    >>> w = pargraph.tensor([1.0], requires_grad=True)
    >>> opt = pargraph.optim.Adamax([w], lr=0.1)
    >>> (w * 2).sum().backward(); opt.step(); round(w.item(), 4)
    0.9
    """

    name = "adamax"

    def __init__(self, params, lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, foreach: bool | None = None, *,
                 maximize: bool = False, differentiable: bool = False,
                 capturable: bool = False):
        check_nonnegative(lr=lr, eps=eps, weight_decay=weight_decay)
        check_betas(betas)
        super().__init__(params, dict(
            lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
            **implementation("Adamax", foreach=foreach, maximize=maximize,
                             differentiable=differentiable, capturable=capturable)))

    def update(self, param: Tensor, grad: Tensor, state: dict, group: dict):
        beta1, beta2 = group["betas"]
        step = state.get("step", 0) + 1
        if group["weight_decay"]:
            grad = grad + param * group["weight_decay"]
        exp_avg = state.get("exp_avg")
        exp_avg = grad * (1 - beta1) if exp_avg is None else \
            exp_avg + (grad - exp_avg) * (1 - beta1)
        exp_inf = state.get("exp_inf")
        bound = grad.abs() + group["eps"]
        exp_inf = bound if exp_inf is None else (exp_inf * beta2).maximum(bound)
        clr = group["lr"] / (1 - beta1 ** step)
        return param - exp_avg / exp_inf * clr, {"step": step, "exp_avg": exp_avg,
                                                 "exp_inf": exp_inf}
