"""Adam and AdamW (PyTorch's formulas, including amsgrad), and what the rest of the Adam
family shares."""

from __future__ import annotations

from pargraph import ops
from pargraph._tensor import Tensor
from pargraph.capturing import sqrt
from pargraph.optim.optimizer import Optimizer, implementation, updated


class Adam(Optimizer):
    """Adam; ``weight_decay`` adds an L2 term to the gradient.

    Examples
    --------
    >>> import pargraph
    >>> w = pargraph.tensor([1.0], requires_grad=True)
    >>> opt = pargraph.optim.Adam([w], lr=0.1)
    >>> (w * 2).sum().backward(); opt.step(); w
    tensor([0.9000], requires_grad=True)
    """

    name = "adam"
    decoupled = False

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, amsgrad: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None,
                 decoupled_weight_decay: bool = False):
        if lr < 0 or eps < 0 or weight_decay < 0:
            raise ValueError(f"Invalid lr {lr}, eps {eps} or weight_decay {weight_decay}")
        if not all(0 <= b < 1 for b in betas):
            raise ValueError(f"Invalid beta parameters: {betas}")
        super().__init__(params, dict(
            lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
            decoupled_weight_decay=decoupled_weight_decay or self.decoupled,
            **implementation(type(self).__name__, foreach=foreach, maximize=maximize,
                             capturable=capturable, differentiable=differentiable,
                             fused=fused)))

    def update(self, param: Tensor, grad: Tensor, state: dict, group: dict):
        beta1, beta2 = group["betas"]
        lr, decay = group["lr"], group["weight_decay"]
        step = state.get("step", 0) + 1
        decoupled = group["decoupled_weight_decay"]
        l2 = 0.0 if decoupled else decay  # AdamW decays the parameter, not the gradient
        m = updated(ops.adam_moment, grad, param, state.get("exp_avg"), beta=beta1,
                    weight_decay=l2, square=False)
        v = updated(ops.adam_moment, grad, param, state.get("exp_avg_sq"), beta=beta2,
                    weight_decay=l2, square=True)
        new_state = {"step": step, "exp_avg": m, "exp_avg_sq": v}
        if group["amsgrad"]:
            v_max = state.get("max_exp_avg_sq")
            v = v if v_max is None else v_max.maximum(v)
            new_state["max_exp_avg_sq"] = v
        new_param = updated(
            ops.adam_step, param, m, v, lr=lr, bias1=1 - beta1 ** step,
            bias2_sqrt=sqrt(1 - beta2 ** step), eps=group["eps"],
            decoupled_decay=lr * decay if decoupled else 0.0)
        return new_param, new_state


class AdamW(Adam):
    """Adam with decoupled weight decay (default 0.01), as in PyTorch.

    Examples
    --------
    >>> import pargraph
    >>> w = pargraph.tensor([1.0], requires_grad=True)
    >>> opt = pargraph.optim.AdamW([w], lr=0.1, weight_decay=0.5)
    >>> (w * 0).sum().backward(); opt.step(); w
    tensor([0.9500], requires_grad=True)
    """

    name = "adamw"
    decoupled = True

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False, *,
                 maximize: bool = False, foreach: bool | None = None, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable,
                         differentiable=differentiable, fused=fused)


# What the Adam family's other members (NAdam, RAdam, Adamax) share, in PyTorch's formulas.

def check_betas(betas: tuple[float, float]) -> None:
    for k, beta in enumerate(betas):
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"Invalid beta parameter at index {k}: {beta}")


def adam_moments(grad: Tensor, state: dict, beta1: float, beta2: float) -> tuple[Tensor, Tensor]:
    """Adam's first and second moments, as PyTorch updates them (``lerp``, ``addcmul``)."""
    exp_avg = state.get("exp_avg")
    exp_avg_sq = state.get("exp_avg_sq")
    exp_avg = grad * (1 - beta1) if exp_avg is None else exp_avg + (grad - exp_avg) * (1 - beta1)
    square = grad * grad * (1 - beta2)
    exp_avg_sq = square if exp_avg_sq is None else exp_avg_sq * beta2 + square
    return exp_avg, exp_avg_sq


def adam_weight_decay(param: Tensor, grad: Tensor, lr: float, decay: float,
                      decoupled: bool) -> tuple[Tensor, Tensor]:
    """Weight decay as PyTorch's Adam family applies it: on the parameter (decoupled, as
    AdamW) or as an L2 term of the gradient."""
    if not decay:
        return param, grad
    if decoupled:
        return param * (1 - lr * decay), grad
    return param, grad + param * decay
