"""RAdam: Adam with a rectified adaptive learning rate (PyTorch's formulas)."""

from __future__ import annotations

import math

from pargraph._tensor import Tensor
from pargraph.optim.adam import adam_moments, adam_weight_decay, check_betas
from pargraph.optim.optimizer import Optimizer, check_nonnegative, implementation


class RAdam(Optimizer):
    """Adam whose adaptive rate is rectified while its variance estimate is unreliable.

    Examples
    --------
    >>> import pargraph
    >>> w = pargraph.tensor([1.0], requires_grad=True)
    >>> opt = pargraph.optim.RAdam([w], lr=0.1)
    >>> (w * 2).sum().backward(); opt.step(); round(w.item(), 4)
    0.8
    """

    name = "radam"

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0,
                 decoupled_weight_decay: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False):
        check_nonnegative(lr=lr, eps=eps, weight_decay=weight_decay)
        check_betas(betas)
        super().__init__(params, dict(
            lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
            decoupled_weight_decay=decoupled_weight_decay,
            **implementation("RAdam", foreach=foreach, maximize=maximize,
                             capturable=capturable, differentiable=differentiable)))

    def update(self, param: Tensor, grad: Tensor, state: dict, group: dict):
        beta1, beta2 = group["betas"]
        lr, decay = group["lr"], group["weight_decay"]
        step = state.get("step", 0) + 1
        param, grad = adam_weight_decay(param, grad, lr, decay, group["decoupled_weight_decay"])
        exp_avg, exp_avg_sq = adam_moments(grad, state, beta1, beta2)
        bias_correction1 = 1 - beta1 ** step
        bias_correction2 = 1 - beta2 ** step
        corrected = exp_avg / bias_correction1
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2
        if rho_t > 5.0:
            rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf
                             / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
            adaptive = math.sqrt(bias_correction2) / (exp_avg_sq.sqrt() + group["eps"])
            param = param - corrected * lr * adaptive * rect
        else:
            param = param - corrected * lr
        return param, {"step": step, "exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq}
