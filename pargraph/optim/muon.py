"""Muon: momentum orthogonalized by Newton-Schulz iterations (PyTorch's formulas)."""

from __future__ import annotations

import math

from pargraph._tensor import Tensor
from pargraph.factories import zeros_like
from pargraph.optim.optimizer import Optimizer

#: The Newton-Schulz coefficients and steps of PyTorch's Muon (Keller Jordan's).
MUON_COEFFICIENTS, MUON_STEPS, MUON_EPS = (3.4445, -4.7750, 2.0315), 5, 1e-7


def orthogonalized(grad: Tensor, coefficients: tuple[float, float, float] = MUON_COEFFICIENTS,
                   steps: int = MUON_STEPS, eps: float = MUON_EPS) -> Tensor:
    """Muon's approximate orthogonalization of a matrix: ``steps`` quintic Newton-Schulz
    iterations in bfloat16 after scaling to spectral norm at most 1, as PyTorch's.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.optim.muon import orthogonalized
    >>> orthogonalized(pargraph.eye(2) * 5).dtype
    pargraph.bfloat16
    """
    if steps >= 100:
        raise ValueError("Number of steps must be less than 100 for computational efficiency")
    if grad.dim() != 2:
        raise ValueError("Input tensor gradient must be a 2D matrix")
    if len(coefficients) != 3:
        raise ValueError("Coefficients must be a tuple of exactly 3 values")
    a, b, c = coefficients
    x = grad.bfloat16()
    tall = grad.size(0) > grad.size(1)
    if tall:
        x = x.T
    x = x / x.norm().clamp(min=eps)
    for _ in range(steps):
        gram = x @ x.T
        x = x.addmm(gram.addmm(gram, gram, beta=b, alpha=c), x, beta=a)
    return x.T if tall else x


class Muon(Optimizer):
    """Muon, as ``torch.optim.Muon``: momentum (Nesterov's by default) whose update is
    orthogonalized by Newton-Schulz iterations (:func:`orthogonalized`), decoupled weight
    decay, and the learning rate scaled by the matrix's shape (``adjust_lr_fn``: None or
    ``"original"``, ``sqrt(max(1, rows / columns))``; ``"match_rms_adamw"``,
    ``0.2 * sqrt(max(rows, columns))``). For 2-D parameters only, as PyTorch's.

    Examples
    --------
    >>> import pargraph
    >>> w = pargraph.tensor([[1.0, 0.0], [0.0, 1.0]], requires_grad=True)
    >>> opt = pargraph.optim.Muon([w], lr=0.1, weight_decay=0.0)
    >>> (w * 2).sum().backward(); opt.step()
    >>> sorted(opt.state[w])
    ['momentum_buffer']
    """

    name = "muon"

    def __init__(self, params, lr: float = 1e-3, weight_decay: float = 0.1,
                 momentum: float = 0.95, nesterov: bool = True,
                 ns_coefficients: tuple[float, float, float] = MUON_COEFFICIENTS,
                 eps: float = MUON_EPS, ns_steps: int = MUON_STEPS,
                 adjust_lr_fn: str | None = None):
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 <= momentum:
            raise ValueError(f"momentum should be >= 0 but is: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight decay should be >= 0 but is: {weight_decay}")
        if adjust_lr_fn is not None and adjust_lr_fn not in ("original", "match_rms_adamw"):
            raise ValueError(f"Adjust learning rate function {adjust_lr_fn} is not supported")
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay, momentum=momentum,
                                      nesterov=nesterov, ns_coefficients=ns_coefficients,
                                      eps=eps, ns_steps=ns_steps, adjust_lr_fn=adjust_lr_fn))
        for group in self.param_groups:
            for p in group["params"]:
                if p.dim() != 2:
                    raise ValueError("Muon only supports 2D parameters whereas we found a "
                                     f"parameter with size: {p.size()}")

    def update(self, param: Tensor, grad: Tensor, state: dict, group: dict):
        lr, momentum = group["lr"], group["momentum"]
        buf = state.get("momentum_buffer")
        buf = (zeros_like(grad) if buf is None else buf).lerp(grad, 1 - momentum)
        update = grad.lerp(buf, momentum) if group["nesterov"] else buf
        update = orthogonalized(update, group["ns_coefficients"], group["ns_steps"],
                                group["eps"])
        rows, columns = param.shape[:2]
        ratio = {"match_rms_adamw": 0.2 * math.sqrt(max(rows, columns))}.get(
            group["adjust_lr_fn"], math.sqrt(max(1, rows / columns)))
        param = param * (1 - lr * group["weight_decay"])
        return param - update.to(param.dtype) * (lr * ratio), {"momentum_buffer": buf}
