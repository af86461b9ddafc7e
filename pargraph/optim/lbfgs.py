"""``LBFGS``: limited-memory BFGS with an optional strong-Wolfe line search, as
``torch.optim.LBFGS`` (its algorithm, step for step).

Each ``step(closure)`` calls the closure (which recomputes the loss and its gradients) up to
``max_eval`` times, so it runs eagerly: the directions are computed on the flattened gradient
as numpy arrays, and each move of the parameters is one in-place update. A step that raises or
is interrupted leaves the parameters and the state as they were before it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable

import numpy as np

from pargraph._tensor import Tensor
from pargraph.autograd.mode import enable_grad, no_grad
from pargraph.factories import tensor
from pargraph.interrupts import interrupts
from pargraph.optim.optimizer import Optimizer


def _cubic_interpolate(x1: float, f1: float, g1: float, x2: float, f2: float, g2: float,
                       bounds: tuple[float, float] | None = None) -> float:
    """The minimizer of the cubic through two points with their slopes, within ``bounds``."""
    xmin_bound, xmax_bound = bounds if bounds is not None else \
        ((x1, x2) if x1 <= x2 else (x2, x1))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 ** 2 - g1 * g2
    if d2_square >= 0:
        d2 = np.sqrt(d2_square)
        if x1 <= x2:
            min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return float(min(max(min_pos, xmin_bound), xmax_bound))
    return (xmin_bound + xmax_bound) / 2.0


def _strong_wolfe(obj_func: Callable, x: list[np.ndarray], t: float, d: np.ndarray, f: float,
                  g: np.ndarray, gtd: float, c1: float = 1e-4, c2: float = 0.9,
                  tolerance_change: float = 1e-9,
                  max_ls: int = 25) -> tuple[float, np.ndarray, float, int]:
    """PyTorch's ``_strong_wolfe``: a step length ``t`` along ``d`` meeting the strong Wolfe
    conditions; returns the loss, gradient, step and evaluations it took."""
    d_norm = float(np.abs(d).max())
    g = g.copy()
    f_new, g_new = obj_func(x, t, d)
    ls_func_evals = 1
    gtd_new = float(g_new @ d)
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done = False
    ls_iter = 0
    while ls_iter < max_ls:
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        min_step = t + 0.01 * (t - t_prev)
        max_step = t * 10
        tmp = t
        t = _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                               bounds=(min_step, max_step))
        t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new.copy(), gtd_new
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = float(g_new @ d)
        ls_iter += 1
    if ls_iter == max_ls:
        bracket, bracket_f, bracket_g = [0.0, t], [f, f_new], [g, g_new]
    insuf_progress = False
    low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0],
                               bracket[1], bracket_f[1], bracket_gtd[1])
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:
            if insuf_progress or t >= max(bracket) or t <= min(bracket):
                t = max(bracket) - eps if abs(t - max(bracket)) < abs(t - min(bracket)) \
                    else min(bracket) + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = float(g_new @ d)
        ls_iter += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low_pos]:
            bracket[high_pos], bracket_f[high_pos] = t, f_new
            bracket_g[high_pos], bracket_gtd[high_pos] = g_new.copy(), gtd_new
            low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high_pos] - bracket[low_pos]) >= 0:
                bracket[high_pos], bracket_f[high_pos] = bracket[low_pos], bracket_f[low_pos]
                bracket_g[high_pos] = bracket_g[low_pos]
                bracket_gtd[high_pos] = bracket_gtd[low_pos]
            bracket[low_pos], bracket_f[low_pos] = t, f_new
            bracket_g[low_pos], bracket_gtd[low_pos] = g_new.copy(), gtd_new
    t = bracket[low_pos]
    return bracket_f[low_pos], bracket_g[low_pos], t, ls_func_evals


class LBFGS(Optimizer):
    """L-BFGS (``torch.optim.LBFGS``): ``step(closure)`` with ``closure`` computing the loss
    and its gradients; one parameter group.

    Examples
    --------
    >>> import pargraph
    >>> x = pargraph.tensor([1.5, -0.5], requires_grad=True)
    >>> opt = pargraph.optim.LBFGS([x], line_search_fn="strong_wolfe")
    >>> def closure():
    ...     opt.zero_grad()
    ...     loss = ((x - pargraph.tensor([3.0, 2.0])) ** 2).sum()
    ...     loss.backward()
    ...     return loss
    >>> _ = opt.step(closure)
    >>> [round(v, 4) for v in x.tolist()]
    [3.0, 2.0]
    """

    name = "lbfgs"

    def __init__(self, params: Iterable[Tensor] | Iterable[dict], lr: float = 1,
                 max_iter: int = 20, max_eval: int | None = None,
                 tolerance_grad: float = 1e-7, tolerance_change: float = 1e-9,
                 history_size: int = 100, line_search_fn: str | None = None) -> None:
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        if line_search_fn not in (None, "strong_wolfe"):
            raise RuntimeError("only 'strong_wolfe' is supported")
        super().__init__(params, dict(lr=lr, max_iter=max_iter, max_eval=max_eval,
                                      tolerance_grad=tolerance_grad,
                                      tolerance_change=tolerance_change,
                                      history_size=history_size,
                                      line_search_fn=line_search_fn))
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    def _gather_flat_grad(self) -> np.ndarray:
        return np.concatenate([
            np.zeros(p.numel()) if p.grad is None else
            p.grad.detach().numpy().reshape(-1).astype(np.float64) for p in self._params])

    def _add_grad(self, step: float, update: np.ndarray) -> None:
        offset = 0
        with no_grad():
            for p in self._params:
                n = p.numel()
                p.add_(tensor(update[offset:offset + n].reshape(p.shape), dtype=p.dtype),
                       alpha=step)
                offset += n

    def _values(self) -> list[np.ndarray]:
        return [p.detach().numpy().copy() for p in self._params]

    def _set(self, values: list[np.ndarray]) -> None:
        with no_grad():
            for p, value in zip(self._params, values):
                p.copy_(tensor(value, dtype=p.dtype))

    def _directional_evaluate(self, closure: Callable, x: list[np.ndarray], t: float,
                              d: np.ndarray) -> tuple[float, np.ndarray]:
        self._add_grad(t, d)
        loss = float(closure())
        flat_grad = self._gather_flat_grad()
        self._set(x)
        return loss, flat_grad

    def step(self, closure: Callable[[], Tensor] | None = None) -> Tensor:  # type: ignore[override]
        """Up to ``max_iter`` L-BFGS iterations; returns the closure's first loss."""
        if closure is None:
            raise RuntimeError("LBFGS requires a closure: step(closure), the closure "
                               "recomputing the loss and calling backward()")
        before, state_before = self._values(), self.state.get(self._params[0])
        saved = None if state_before is None else {
            k: (list(v) if isinstance(v, list) else v) for k, v in state_before.items()}
        with interrupts.failsafe():  # a second Ctrl-C waits for the restoring's end
            try:
                return self._step(closure)
            except BaseException:  # all old: the parameters and the state
                self._set(before)
                if saved is None:
                    self.state.pop(self._params[0], None)
                else:
                    self.state[self._params[0]] = saved
                raise

    def _step(self, closure: Callable[[], Tensor]) -> Tensor:
        closure = enable_grad()(closure)
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn, history_size = group["line_search_fn"], group["history_size"]
        state = self.state.setdefault(self._params[0], {})
        state = self.state[self._params[0]] = dict(state)
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        orig_loss = closure()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._gather_flat_grad()
        if np.abs(flat_grad).max() <= tolerance_grad:
            return orig_loss
        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        H_diag = state.get("H_diag")  # noqa: N806  (PyTorch's name)
        prev_flat_grad, prev_loss = state.get("prev_flat_grad"), state.get("prev_loss")
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = -flat_grad
                old_dirs, old_stps, ro = [], [], []
                H_diag = 1.0  # noqa: N806
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = float(y @ s)
                if ys > 1e-10:
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / float(y @ y)  # noqa: N806
                num_old = len(old_dirs)
                al = [0.0] * num_old
                q = -flat_grad
                for i in range(num_old - 1, -1, -1):
                    al[i] = float(old_stps[i] @ q) * ro[i]
                    q = q - al[i] * old_dirs[i]
                d = r = q * H_diag
                for i in range(num_old):
                    be_i = float(old_dirs[i] @ r) * ro[i]
                    r = r + old_stps[i] * (al[i] - be_i)
                d = r
            prev_flat_grad = flat_grad.copy()
            prev_loss = loss
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / np.abs(flat_grad).sum()) * lr
            else:
                t = lr
            gtd = float(flat_grad @ d)
            if gtd > -tolerance_change:
                break
            ls_func_evals = 0
            if line_search_fn is not None:
                x_init = self._values()

                def obj_func(x: list[np.ndarray], t: float, d: np.ndarray) -> tuple:
                    return self._directional_evaluate(closure, x, t, d)

                loss, flat_grad, t, ls_func_evals = _strong_wolfe(
                    obj_func, x_init, t, d, loss, flat_grad, gtd)
                self._add_grad(t, d)
                opt_cond = np.abs(flat_grad).max() <= tolerance_grad
            else:
                self._add_grad(t, d)
                if n_iter != max_iter:
                    loss = float(closure())
                    flat_grad = self._gather_flat_grad()
                    opt_cond = np.abs(flat_grad).max() <= tolerance_grad
                    ls_func_evals = 1
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals
            if n_iter == max_iter or current_evals >= max_eval:
                break
            if opt_cond:
                break
            if np.abs(d * t).max() <= tolerance_change:
                break
            if abs(loss - prev_loss) < tolerance_change:
                break
        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=H_diag,
                     prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        self._step_count += 1
        return orig_loss

    def state_dict(self) -> dict:
        """As PyTorch's: the one state (history lists of arrays included) and the group."""
        saved = super().state_dict()
        saved["state"] = {k: {name: ([np.asarray(a) for a in v] if isinstance(v, list)
                                     else v) for name, v in s.items()}
                          for k, s in saved["state"].items()}
        return saved

    def load_state_dict(self, state_dict: dict) -> None:
        own = {int(k): dict(v) for k, v in state_dict["state"].items()}
        group = dict(state_dict["param_groups"][0])
        with interrupts.deferred():
            self.param_groups[0].update({k: v for k, v in group.items() if k != "params"})
            self.state = defaultdict(dict, {self._params[0]: own[0]} if 0 in own else {})
            self._state_version += 1
