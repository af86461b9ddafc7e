"""NAdam: Adam with Nesterov momentum (PyTorch's single-tensor formulas)."""

from __future__ import annotations

from pargraph._tensor import Tensor
from pargraph.optim.adam import adam_moments, adam_weight_decay, check_betas
from pargraph.optim.optimizer import Optimizer, check_nonnegative, implementation


class NAdam(Optimizer):
    """Adam with Nesterov momentum and its momentum decay schedule.

    Examples
    --------
    >>> import pargraph
    >>> w = pargraph.tensor([1.0], requires_grad=True)
    >>> opt = pargraph.optim.NAdam([w], lr=0.1)
    >>> (w * 2).sum().backward(); opt.step(); round(w.item(), 4)
    0.8944
    """

    name = "nadam"

    def __init__(self, params, lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False):
        check_nonnegative(lr=lr, eps=eps, weight_decay=weight_decay, momentum_decay=momentum_decay)
        check_betas(betas)
        super().__init__(params, dict(
            lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
            momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
            **implementation("NAdam", foreach=foreach, maximize=maximize,
                             capturable=capturable, differentiable=differentiable)))

    def update(self, param: Tensor, grad: Tensor, state: dict, group: dict):
        beta1, beta2 = group["betas"]
        lr, decay = group["lr"], group["weight_decay"]
        step = state.get("step", 0) + 1
        param, grad = adam_weight_decay(param, grad, lr, decay, group["decoupled_weight_decay"])
        mu = beta1 * (1.0 - 0.5 * 0.96 ** (step * group["momentum_decay"]))
        mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * group["momentum_decay"]))
        mu_product = state.get("mu_product", 1.0) * mu
        exp_avg, exp_avg_sq = adam_moments(grad, state, beta1, beta2)
        denom = (exp_avg_sq / (1 - beta2 ** step)).sqrt() + group["eps"]
        param = param - grad / denom * (lr * (1.0 - mu) / (1.0 - mu_product))
        param = param - exp_avg / denom * (lr * mu_next / (1.0 - mu_product * mu_next))
        return param, {"step": step, "mu_product": mu_product, "exp_avg": exp_avg,
                       "exp_avg_sq": exp_avg_sq}
