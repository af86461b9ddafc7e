"""ASGD: averaged stochastic gradient descent (PyTorch's formulas)."""

from __future__ import annotations

from pargraph._tensor import Tensor
from pargraph.optim.optimizer import Optimizer, check_nonnegative, implementation


class ASGD(Optimizer):
    """Averaged stochastic gradient descent: SGD with a decaying rate, and ``ax``, the
    running average of the parameters.

    Examples
    --------
    >>> import pargraph
    >>> w = pargraph.tensor([1.0], requires_grad=True)
    >>> opt = pargraph.optim.ASGD([w], lr=0.1)
    >>> (w * 2).sum().backward(); opt.step(); round(w.item(), 4)
    0.8
    """

    name = "asgd"

    def __init__(self, params, lr: float = 1e-2, lambd: float = 1e-4, alpha: float = 0.75,
                 t0: float = 1e6, weight_decay: float = 0, foreach: bool | None = None,
                 maximize: bool = False, differentiable: bool = False,
                 capturable: bool = False):
        check_nonnegative(lr=lr, weight_decay=weight_decay)
        super().__init__(params, dict(
            lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
            **implementation("ASGD", foreach=foreach, maximize=maximize,
                             differentiable=differentiable, capturable=capturable)))

    def update(self, param: Tensor, grad: Tensor, state: dict, group: dict):
        lr, lambd = group["lr"], group["lambd"]
        step = state.get("step", 0) + 1
        eta, mu = state.get("eta", lr), state.get("mu", 1.0)
        if group["weight_decay"]:
            grad = grad + param * group["weight_decay"]
        param = param * (1 - lambd * eta) - grad * eta
        ax = state.get("ax")
        ax = param * 1.0 if mu == 1 or ax is None else ax + (param - ax) * mu
        new_eta = lr / ((1 + lambd * lr * step) ** group["alpha"])
        new_mu = 1 / max(1, step - group["t0"])
        return param, {"step": step, "eta": new_eta, "mu": new_mu, "ax": ax}
