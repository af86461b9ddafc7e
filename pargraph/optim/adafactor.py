"""Adafactor: factored second moments of matrices (PyTorch's formulas)."""

from __future__ import annotations

import numpy as np

from pargraph._tensor import Tensor
from pargraph.factories import zeros_like
from pargraph.optim.optimizer import Optimizer, implementation


class Adafactor(Optimizer):
    """Adafactor (Shazeer and Stern, 2018), as ``torch.optim.Adafactor``: per matrix, a row
    and a column of second-moment estimates instead of one per element (memory of the order
    of rows + columns), a relative step size (the parameter's RMS times
    ``min(lr, 1/sqrt(step))``) and the update clipped to RMS ``d``. Vectors keep one estimate
    per element.

    Examples
    --------
    >>> import pargraph
    >>> w = pargraph.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    >>> opt = pargraph.optim.Adafactor([w], lr=0.1)
    >>> (w * 2).sum().backward(); opt.step()
    >>> sorted(opt.state[w])
    ['col_var', 'row_var', 'step']
    """

    name = "adafactor"

    def __init__(self, params, lr: float = 1e-2, beta2_decay: float = -0.8,
                 eps: tuple[float | None, float] = (None, 1e-3), d: float = 1.0,
                 weight_decay: float = 0.0, *, foreach: bool | None = None,
                 maximize: bool = False):
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        super().__init__(params, dict(lr=lr, beta2_decay=beta2_decay, eps=tuple(eps), d=d,
                                      weight_decay=weight_decay,
                                      **implementation("Adafactor", foreach=foreach,
                                                       maximize=maximize)))

    def update(self, param: Tensor, grad: Tensor, state: dict, group: dict):
        lr, decay = group["lr"], group["weight_decay"]
        eps1, eps2 = group["eps"]
        if eps1 is None:
            eps1 = float(np.finfo(param.dtype).eps)
        step = state.get("step", 0) + 1
        weight = step ** group["beta2_decay"]  # 1 - beta2 at this step
        rho = min(lr, 1 / step ** 0.5)
        # PyTorch reads the parameter's RMS and the update's with .item(): here they stay
        # tensors of the step's graph, the same numbers.
        alpha = (param.norm() / param.numel() ** 0.5).clamp(min=eps2) * rho
        if decay:
            param = param * (1 - lr * decay)
        if grad.dim() > 1:
            row_var, col_var = (state.get(name) for name in ("row_var", "col_var"))
            row_mean = grad.norm(dim=-1, keepdim=True).square() / grad.size(-1)
            col_mean = grad.norm(dim=-2, keepdim=True).square() / grad.size(-2)
            row_var = (zeros_like(row_mean) if row_var is None else row_var).lerp(row_mean,
                                                                                   weight)
            col_var = (zeros_like(col_mean) if col_var is None else col_var).lerp(col_mean,
                                                                                   weight)
            estimate = (row_var @ col_var) / row_var.mean(dim=-2, keepdim=True).clamp(min=eps1)
            new_state = {"step": step, "row_var": row_var, "col_var": col_var}
        else:
            variance = state.get("variance")
            squared = grad * grad
            estimate = (zeros_like(squared) if variance is None else variance).lerp(squared,
                                                                                   weight)
            new_state = {"step": step, "variance": estimate}
        update = estimate.clamp(min=eps1 * eps1).rsqrt() * grad
        denom = (update.norm() / (update.numel() ** 0.5 * group["d"])).clamp(min=1.0)
        return param - update * (alpha / denom), new_state
