"""Rprop: resilient backpropagation, steps by the gradient's sign (PyTorch's formulas)."""

from __future__ import annotations

from pargraph._tensor import Tensor
from pargraph.autograd.mode import no_grad
from pargraph.factories import full_like, zeros_like
from pargraph.functions import where
from pargraph.optim.optimizer import Optimizer, check_nonnegative, implementation


class Rprop(Optimizer):
    """Resilient backpropagation: per element, a step size that grows while the gradient
    keeps its sign and shrinks when it flips; only the gradient's sign is used.

    Examples
    --------
    >>> import pargraph
    >>> w = pargraph.tensor([1.0], requires_grad=True)
    >>> opt = pargraph.optim.Rprop([w], lr=0.1)
    >>> (w * 2).sum().backward(); opt.step(); round(w.item(), 4)
    0.9
    """

    name = "rprop"

    def __init__(self, params, lr: float = 1e-2, etas: tuple[float, float] = (0.5, 1.2),
                 step_sizes: tuple[float, float] = (1e-6, 50), *, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False):
        check_nonnegative(lr=lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        super().__init__(params, dict(
            lr=lr, etas=tuple(etas), step_sizes=tuple(step_sizes),
            **implementation("Rprop", capturable=capturable, foreach=foreach,
                             maximize=maximize, differentiable=differentiable)))

    def update(self, param: Tensor, grad: Tensor, state: dict, group: dict):
        eta_minus, eta_plus = group["etas"]
        low, high = group["step_sizes"]
        with no_grad():
            prev = state.get("prev")
            prev = zeros_like(param) if prev is None else prev
            step_size = state.get("step_size")
            step_size = full_like(grad, group["lr"]) if step_size is None else step_size
            agreement = (grad * prev).sign()
            factor = where(agreement > 0, eta_plus, where(agreement < 0, eta_minus, 1.0))
            step_size = (step_size * factor).clamp(low, high)
            grad = where(agreement < 0, grad * 0.0, grad)
            param = param - grad.sign() * step_size
        return param, {"step": state.get("step", 0) + 1, "prev": grad, "step_size": step_size}
