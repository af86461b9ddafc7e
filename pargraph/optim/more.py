"""NAdam, RAdam, Adamax, Rprop, ASGD, Adafactor and Muon: PyTorch's single-tensor formulas,
written with tensor ops (each update a few nodes per parameter, recorded into the step's graph
like the rest)."""

from __future__ import annotations

import math

import numpy as np

from pargraph._tensor import Tensor
from pargraph.autograd.mode import no_grad
from pargraph.factories import full_like, zeros_like
from pargraph.functions import where
from pargraph.optim.optimizer import Optimizer, check_nonnegative, implementation


def _check_betas(betas: tuple[float, float]) -> None:
    for k, beta in enumerate(betas):
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"Invalid beta parameter at index {k}: {beta}")


def _moments(grad: Tensor, state: dict, beta1: float, beta2: float) -> tuple[Tensor, Tensor]:
    """Adam's first and second moments, as PyTorch updates them (``lerp``, ``addcmul``)."""
    exp_avg = state.get("exp_avg")
    exp_avg_sq = state.get("exp_avg_sq")
    exp_avg = grad * (1 - beta1) if exp_avg is None else exp_avg + (grad - exp_avg) * (1 - beta1)
    square = grad * grad * (1 - beta2)
    exp_avg_sq = square if exp_avg_sq is None else exp_avg_sq * beta2 + square
    return exp_avg, exp_avg_sq


def _weight_decay(param: Tensor, grad: Tensor, lr: float, decay: float,
                  decoupled: bool) -> tuple[Tensor, Tensor]:
    """Weight decay as PyTorch's Adam family applies it: on the parameter (decoupled, as
    AdamW) or as an L2 term of the gradient."""
    if not decay:
        return param, grad
    if decoupled:
        return param * (1 - lr * decay), grad
    return param, grad + param * decay


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
        _check_betas(betas)
        super().__init__(params, dict(
            lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
            momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
            **implementation("NAdam", foreach=foreach, maximize=maximize,
                             capturable=capturable, differentiable=differentiable)))

    def update(self, param: Tensor, grad: Tensor, state: dict, group: dict):
        beta1, beta2 = group["betas"]
        lr, decay = group["lr"], group["weight_decay"]
        step = state.get("step", 0) + 1
        param, grad = _weight_decay(param, grad, lr, decay, group["decoupled_weight_decay"])
        mu = beta1 * (1.0 - 0.5 * 0.96 ** (step * group["momentum_decay"]))
        mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * group["momentum_decay"]))
        mu_product = state.get("mu_product", 1.0) * mu
        exp_avg, exp_avg_sq = _moments(grad, state, beta1, beta2)
        denom = (exp_avg_sq / (1 - beta2 ** step)).sqrt() + group["eps"]
        param = param - grad / denom * (lr * (1.0 - mu) / (1.0 - mu_product))
        param = param - exp_avg / denom * (lr * mu_next / (1.0 - mu_product * mu_next))
        return param, {"step": step, "mu_product": mu_product, "exp_avg": exp_avg,
                       "exp_avg_sq": exp_avg_sq}


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
        _check_betas(betas)
        super().__init__(params, dict(
            lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
            decoupled_weight_decay=decoupled_weight_decay,
            **implementation("RAdam", foreach=foreach, maximize=maximize,
                             capturable=capturable, differentiable=differentiable)))

    def update(self, param: Tensor, grad: Tensor, state: dict, group: dict):
        beta1, beta2 = group["betas"]
        lr, decay = group["lr"], group["weight_decay"]
        step = state.get("step", 0) + 1
        param, grad = _weight_decay(param, grad, lr, decay, group["decoupled_weight_decay"])
        exp_avg, exp_avg_sq = _moments(grad, state, beta1, beta2)
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
        _check_betas(betas)
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


#: The Newton-Schulz coefficients and steps of PyTorch's Muon (Keller Jordan's).
MUON_COEFFICIENTS, MUON_STEPS, MUON_EPS = (3.4445, -4.7750, 2.0315), 5, 1e-7


def orthogonalized(grad: Tensor, coefficients: tuple[float, float, float] = MUON_COEFFICIENTS,
                   steps: int = MUON_STEPS, eps: float = MUON_EPS) -> Tensor:
    """Muon's approximate orthogonalization of a matrix: ``steps`` quintic Newton-Schulz
    iterations in bfloat16 after scaling to spectral norm at most 1, as PyTorch's.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.optim.more import orthogonalized
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
