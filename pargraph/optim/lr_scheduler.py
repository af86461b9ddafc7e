"""Learning-rate schedulers: ``StepLR``, ``MultiStepLR``, ``LambdaLR``, ``CosineAnnealingLR``,
``OneCycleLR`` (per batch) and ``ReduceLROnPlateau`` (on a metric), with PyTorch's formulas."""

from __future__ import annotations

import bisect
import math
from typing import Any

from pargraph.interrupts import interrupts
from pargraph.optim.optimizer import Optimizer


class _SchedulerState:
    """What every scheduler answers: its last learning rates and its state (no optimizer)."""

    _last_lr: list[float]

    def get_last_lr(self) -> list[float]:
        return list(self._last_lr)

    def state_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update(state_dict)


class LRScheduler(_SchedulerState):
    """Sets each group's ``lr`` from ``get_lr()`` on every ``step()`` (call it once per epoch)."""

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self.step()

    def get_lr(self) -> list[float]:
        raise NotImplementedError

    def step(self) -> None:
        with interrupts.deferred():  # every group's rate and the epoch move together
            self.last_epoch += 1
            for group, lr in zip(self.optimizer.param_groups, self.get_lr()):
                group["lr"] = lr
            self._last_lr = [group["lr"] for group in self.optimizer.param_groups]


class StepLR(LRScheduler):
    """Multiply the learning rate by ``gamma`` every ``step_size`` epochs.

    Examples
    --------
    >>> import pargraph
    >>> opt = pargraph.optim.SGD([pargraph.zeros(1, requires_grad=True)], lr=1.0)
    >>> sched = pargraph.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    >>> for _ in range(4): sched.step()
    >>> sched.get_last_lr()
    [0.25]
    """

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [base * self.gamma ** (self.last_epoch // self.step_size) for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Anneal the learning rate from its initial value to ``eta_min`` over ``T_max`` epochs.

    Examples
    --------
    >>> import pargraph
    >>> opt = pargraph.optim.SGD([pargraph.zeros(1, requires_grad=True)], lr=1.0)
    >>> sched = pargraph.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4)
    >>> for _ in range(2): sched.step()
    >>> sched.get_last_lr()
    [0.5]
    """

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0,
                 last_epoch: int = -1) -> None:
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        phase = math.pi * self.last_epoch / self.T_max
        return [self.eta_min + (base - self.eta_min) * (1 + math.cos(phase)) / 2
                for base in self.base_lrs]


class LambdaLR(LRScheduler):
    """The initial learning rate times ``lr_lambda(epoch)`` (one function, or one per group).

    Examples
    --------
    >>> import pargraph
    >>> opt = pargraph.optim.SGD([pargraph.zeros(1, requires_grad=True)], lr=1.0)
    >>> sched = pargraph.optim.lr_scheduler.LambdaLR(opt, lambda epoch: 0.5 ** epoch)
    >>> sched.step(); sched.step(); sched.get_last_lr()
    [0.25]
    """

    def __init__(self, optimizer: Optimizer, lr_lambda: Any, last_epoch: int = -1) -> None:
        groups = len(optimizer.param_groups)
        self.lr_lambdas = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else \
            [lr_lambda] * groups
        if len(self.lr_lambdas) != groups:
            raise ValueError(f"Expected {groups} lr_lambdas, but got {len(self.lr_lambdas)}")
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [base * f(self.last_epoch) for base, f in zip(self.base_lrs, self.lr_lambdas)]

    def state_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}


class MultiStepLR(LRScheduler):
    """Multiply the learning rate by ``gamma`` at each of the ``milestones`` (epochs).

    Examples
    --------
    >>> import pargraph
    >>> opt = pargraph.optim.SGD([pargraph.zeros(1, requires_grad=True)], lr=1.0)
    >>> sched = pargraph.optim.lr_scheduler.MultiStepLR(opt, milestones=[1, 3], gamma=0.1)
    >>> for _ in range(3): sched.step()
    >>> [round(lr, 6) for lr in sched.get_last_lr()]
    [0.01]
    """

    def __init__(self, optimizer: Optimizer, milestones: list[int], gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        self.milestones, self.gamma = sorted(milestones), gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        passed = bisect.bisect_right(self.milestones, self.last_epoch)
        return [base * self.gamma ** passed for base in self.base_lrs]


class OneCycleLR(LRScheduler):
    """The 1cycle policy: warm up from ``max_lr / div_factor`` to ``max_lr``, then anneal to
    ``initial / final_div_factor`` (cosine or linear), over ``total_steps`` (or ``epochs *
    steps_per_epoch``) batches; momentum (or Adam's beta1) cycles the other way.

    Examples
    --------
    >>> import pargraph
    >>> opt = pargraph.optim.SGD([pargraph.zeros(1, requires_grad=True)], lr=0.1, momentum=0.9)
    >>> sched = pargraph.optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=10)
    >>> [round(lr, 4) for lr in sched.get_last_lr()]
    [0.04]
    """

    def __init__(self, optimizer: Optimizer, max_lr: Any, total_steps: int | None = None,
                 epochs: int | None = None, steps_per_epoch: int | None = None,
                 pct_start: float = 0.3, anneal_strategy: str = "cos",
                 cycle_momentum: bool = True, base_momentum: float = 0.85,
                 max_momentum: float = 0.95, div_factor: float = 25.0,
                 final_div_factor: float = 1e4, three_phase: bool = False,
                 last_epoch: int = -1) -> None:
        if total_steps is None:
            if epochs is None or steps_per_epoch is None:
                raise ValueError("You must define either total_steps OR (epochs AND "
                                 "steps_per_epoch)")
            total_steps = epochs * steps_per_epoch
        if total_steps <= 0:
            raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        self.total_steps = total_steps
        self.anneal = _cos_anneal if anneal_strategy == "cos" else _linear_anneal
        groups = optimizer.param_groups
        max_lrs = list(max_lr) if isinstance(max_lr, (list, tuple)) else [max_lr] * len(groups)
        for group, top in zip(groups, max_lrs):
            group["initial_lr"] = top / div_factor
            group["max_lr"] = top
            group["min_lr"] = group["initial_lr"] / final_div_factor
        end = float(pct_start * total_steps) - 1
        self.phases = [(end, "initial_lr", "max_lr", "max_momentum", "base_momentum")]
        if three_phase:
            self.phases += [(2 * end, "max_lr", "initial_lr", "base_momentum", "max_momentum")]
        if three_phase:
            self.phases += [(total_steps - 1, "initial_lr", "min_lr", "max_momentum",
                             "max_momentum")]
        else:
            self.phases += [(total_steps - 1, "max_lr", "min_lr", "base_momentum",
                             "max_momentum")]
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError("optimizer must support momentum or beta1 with "
                                 "`cycle_momentum` option enabled")
            for group in groups:
                group["max_momentum"], group["base_momentum"] = max_momentum, base_momentum
                self._set_momentum(group, max_momentum)
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _set_momentum(group: dict, value: float) -> None:
        if "betas" in group:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def get_lr(self) -> list[float]:
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"Tried to step {step} times. The specified number of total steps "
                             f"is {self.total_steps}")
        lrs = []
        for group in self.optimizer.param_groups:
            start = 0.0
            for k, (end, lr_from, lr_to, m_from, m_to) in enumerate(self.phases):
                if step <= end or k == len(self.phases) - 1:
                    pct = (step - start) / (end - start) if end > start else 1.0
                    lrs.append(self.anneal(group[lr_from], group[lr_to], pct))
                    if self.cycle_momentum:
                        self._set_momentum(group, self.anneal(group[m_from], group[m_to], pct))
                    break
                start = end
        return lrs


def _cos_anneal(start: float, end: float, pct: float) -> float:
    return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)


def _linear_anneal(start: float, end: float, pct: float) -> float:
    return (end - start) * pct + start


class ReduceLROnPlateau(_SchedulerState):
    """Multiply the learning rate by ``factor`` once ``metrics`` passed to ``step`` stopped
    improving for ``patience`` epochs (PyTorch's modes, thresholds and cooldown).

    Examples
    --------
    >>> import pargraph
    >>> opt = pargraph.optim.SGD([pargraph.zeros(1, requires_grad=True)], lr=1.0)
    >>> sched = pargraph.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=1, factor=0.5)
    >>> for loss in [1.0, 1.0, 1.0]: sched.step(loss)
    >>> sched.get_last_lr()
    [0.5]
    """

    def __init__(self, optimizer: Optimizer, mode: str = "min", factor: float = 0.1,
                 patience: int = 10, threshold: float = 1e-4, threshold_mode: str = "rel",
                 cooldown: int = 0, min_lr: Any = 0.0, eps: float = 1e-8) -> None:
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        if mode not in ("min", "max") or threshold_mode not in ("rel", "abs"):
            raise ValueError(f"mode {mode!r} or threshold_mode {threshold_mode!r} is unknown")
        self.optimizer = optimizer
        groups = len(optimizer.param_groups)
        self.min_lrs = list(min_lr) if isinstance(min_lr, (list, tuple)) else [min_lr] * groups
        self.mode, self.factor, self.patience = mode, factor, patience
        self.threshold, self.threshold_mode = threshold, threshold_mode
        self.cooldown, self.eps = cooldown, eps
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs = self.cooldown_counter = 0
        self.last_epoch = 0
        self._last_lr = [group["lr"] for group in optimizer.param_groups]

    def _better(self, current: float) -> bool:
        if self.mode == "min":
            bound = self.best * (1 - self.threshold) if self.threshold_mode == "rel" else \
                self.best - self.threshold
            return current < bound
        bound = self.best * (1 + self.threshold) if self.threshold_mode == "rel" else \
            self.best + self.threshold
        return current > bound

    def step(self, metrics: Any) -> None:
        current = float(metrics)  # a loss tensor is realized here, as in PyTorch's item()
        with interrupts.deferred():
            self._step(current)

    def _step(self, current: float) -> None:
        self.last_epoch += 1
        if self._better(current):
            self.best, self.num_bad_epochs = current, 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            for group, low in zip(self.optimizer.param_groups, self.min_lrs):
                new_lr = max(group["lr"] * self.factor, low)
                if group["lr"] - new_lr > self.eps:
                    group["lr"] = new_lr
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]
