"""Learning-rate schedulers with PyTorch's names and formulas: per epoch (``StepLR``,
``MultiStepLR``, ``LambdaLR``, ``CosineAnnealingLR``, ``ExponentialLR``, ``ConstantLR``,
``LinearLR``, ``PolynomialLR``, ``MultiplicativeLR``, ``CosineAnnealingWarmRestarts``), per
batch (``OneCycleLR``, ``CyclicLR``), on a metric (``ReduceLROnPlateau``), and combined
(``SequentialLR``, ``ChainedScheduler``)."""

from __future__ import annotations

import bisect
import functools
import math
import warnings
from collections.abc import Callable
from typing import Any

from pargraph.capturing import recording
from pargraph.interrupts import interrupts
from pargraph.optim.optimizer import Optimizer

#: PyTorch's warning for a schedule stepped before its optimizer (whose first rate it skips).
EARLY_STEP = (
    "Detected call of `lr_scheduler.step()` before `optimizer.step()`. In PyTorch 1.1.0 and "
    "later, you should call them in the opposite order: `optimizer.step()` before "
    "`lr_scheduler.step()`.  Failure to do this will result in PyTorch skipping the first "
    "value of the learning rate schedule. See more details at "
    "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate")


class _SchedulerState:
    """What every scheduler answers: its last learning rates and its state (no optimizer)."""

    _last_lr: list[float]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "step" in cls.__dict__:  # every scheduler's own step(), a user's subclass too
            cls.step = _outside_captures(cls.__dict__["step"])

    def get_last_lr(self) -> list[float]:
        return list(self._last_lr)

    def state_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update(state_dict)


def _outside_captures(step: Callable) -> Callable:
    """``step`` telling a capturing :func:`pargraph.compile` that it runs: it changes Python
    numbers, which a replay would not change again, so the capture stops there (a graph
    break) instead of replaying a schedule that no longer moves."""
    @functools.wraps(step)
    def checked(self: Any, *args: Any, **kwargs: Any) -> Any:
        recorder = recording.recorder
        if recorder is not None:
            recorder.scheduler_stepped(self)
        return step(self, *args, **kwargs)
    return checked


class LRScheduler(_SchedulerState):
    """Sets each group's ``lr`` from ``get_lr()`` on every ``step()`` (call it once per epoch)."""

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self) -> None:
        """The step a scheduler takes when it is made (epoch 0); ``_step_count`` counts the
        steps from here, as PyTorch's."""
        self._step_count = 0
        self.step()

    def get_lr(self) -> list[float]:
        raise NotImplementedError

    def step(self) -> None:
        count = getattr(self, "_step_count", 0)
        if count == 1 and not getattr(self.optimizer, "_step_count", 1):
            warnings.warn(EARLY_STEP, UserWarning, stacklevel=3)
        with interrupts.deferred():  # every group's rate and the epoch move together
            self._step_count = count + 1
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


def _lambdas(optimizer: Optimizer, lr_lambda: Any) -> list:
    """One function per parameter group (``lr_lambda``: one for all, or a list)."""
    groups = len(optimizer.param_groups)
    lambdas = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else [lr_lambda] * groups
    if len(lambdas) != groups:
        raise ValueError(f"Expected {groups} lr_lambdas, but got {len(lambdas)}")
    return lambdas


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
        self.lr_lambdas = _lambdas(optimizer, lr_lambda)
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


# Chainable schedulers: each step multiplies the rate a group has now, as PyTorch's do, so
# that ChainedScheduler can compose them.


class ConstantLR(LRScheduler):
    """The learning rate times ``factor`` for the first ``total_iters`` epochs.

    Examples
    --------
    >>> import pargraph
    >>> opt = pargraph.optim.SGD([pargraph.zeros(1, requires_grad=True)], lr=1.0)
    >>> sched = pargraph.optim.lr_scheduler.ConstantLR(opt, factor=0.5, total_iters=2)
    >>> [sched.get_last_lr()[0]] + [sched.step() or sched.get_last_lr()[0] for _ in range(2)]
    [0.5, 0.5, 1.0]
    """

    def __init__(self, optimizer: Optimizer, factor: float = 1.0 / 3, total_iters: int = 5,
                 last_epoch: int = -1) -> None:
        if not 0 <= factor <= 1:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        lrs = [group["lr"] for group in self.optimizer.param_groups]
        if self.last_epoch == 0:
            return [lr * self.factor for lr in lrs]
        if self.last_epoch != self.total_iters:
            return lrs
        return [lr * (1.0 / self.factor) for lr in lrs]


class LinearLR(LRScheduler):
    """The learning rate times a factor going linearly from ``start_factor`` to ``end_factor``
    over ``total_iters`` epochs.

    Examples
    --------
    >>> import pargraph
    >>> opt = pargraph.optim.SGD([pargraph.zeros(1, requires_grad=True)], lr=1.0)
    >>> sched = pargraph.optim.lr_scheduler.LinearLR(opt, start_factor=0.5, total_iters=2)
    >>> [sched.get_last_lr()[0]] + [sched.step() or sched.get_last_lr()[0] for _ in range(2)]
    [0.5, 0.75, 1.0]
    """

    def __init__(self, optimizer: Optimizer, start_factor: float = 1.0 / 3,
                 end_factor: float = 1.0, total_iters: int = 5, last_epoch: int = -1) -> None:
        if not 0 < start_factor <= 1:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 "
                             "and less or equal to 1.")
        if not 0 <= end_factor <= 1:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor, self.end_factor, self.total_iters = (start_factor, end_factor,
                                                                total_iters)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        lrs = [group["lr"] for group in self.optimizer.param_groups]
        if self.last_epoch == 0:
            return [lr * self.start_factor for lr in lrs]
        if self.last_epoch > self.total_iters:
            return lrs
        slope = self.end_factor - self.start_factor
        ratio = 1.0 + slope / (self.total_iters * self.start_factor
                               + (self.last_epoch - 1) * slope)
        return [lr * ratio for lr in lrs]


class ExponentialLR(LRScheduler):
    """Multiply the learning rate by ``gamma`` every epoch.

    Examples
    --------
    >>> import pargraph
    >>> opt = pargraph.optim.SGD([pargraph.zeros(1, requires_grad=True)], lr=1.0)
    >>> sched = pargraph.optim.lr_scheduler.ExponentialLR(opt, gamma=0.5)
    >>> sched.step(); sched.step(); sched.get_last_lr()
    [0.25]
    """

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        lrs = [group["lr"] for group in self.optimizer.param_groups]
        return lrs if self.last_epoch == 0 else [lr * self.gamma for lr in lrs]


class PolynomialLR(LRScheduler):
    """Decay the learning rate as ``(1 - epoch / total_iters) ** power`` until
    ``total_iters``.

    Examples
    --------
    >>> import pargraph
    >>> opt = pargraph.optim.SGD([pargraph.zeros(1, requires_grad=True)], lr=1.0)
    >>> sched = pargraph.optim.lr_scheduler.PolynomialLR(opt, total_iters=4)
    >>> sched.step(); sched.step(); sched.get_last_lr()
    [0.5]
    """

    def __init__(self, optimizer: Optimizer, total_iters: int = 5, power: float = 1.0,
                 last_epoch: int = -1) -> None:
        self.total_iters, self.power = total_iters, power
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        lrs = [group["lr"] for group in self.optimizer.param_groups]
        if self.last_epoch == 0 or self.last_epoch > self.total_iters:
            return lrs
        factor = ((1.0 - self.last_epoch / self.total_iters)
                  / (1.0 - (self.last_epoch - 1) / self.total_iters)) ** self.power
        return [lr * factor for lr in lrs]


class MultiplicativeLR(LRScheduler):
    """Multiply the learning rate by ``lr_lambda(epoch)`` every epoch (one function, or one
    per group).

    Examples
    --------
    >>> import pargraph
    >>> opt = pargraph.optim.SGD([pargraph.zeros(1, requires_grad=True)], lr=1.0)
    >>> sched = pargraph.optim.lr_scheduler.MultiplicativeLR(opt, lambda epoch: 0.5)
    >>> sched.step(); sched.step(); sched.get_last_lr()
    [0.25]
    """

    def __init__(self, optimizer: Optimizer, lr_lambda: Any, last_epoch: int = -1) -> None:
        self.lr_lambdas = _lambdas(optimizer, lr_lambda)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        lrs = [group["lr"] for group in self.optimizer.param_groups]
        if self.last_epoch <= 0:
            return lrs
        return [lr * f(self.last_epoch) for lr, f in zip(lrs, self.lr_lambdas)]


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing from the initial rate to ``eta_min`` over ``T_0`` epochs, restarting,
    each period ``T_mult`` times the last.

    Examples
    --------
    >>> import pargraph
    >>> opt = pargraph.optim.SGD([pargraph.zeros(1, requires_grad=True)], lr=1.0)
    >>> sched = pargraph.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2)
    >>> [sched.step() or sched.get_last_lr()[0] for _ in range(3)]
    [0.5, 1.0, 0.5]
    """

    def __init__(self, optimizer: Optimizer, T_0: int, T_mult: int = 1, eta_min: float = 0.0,
                 last_epoch: int = -1) -> None:
        if T_0 <= 0 or not isinstance(T_0, int):
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if T_mult < 1 or not isinstance(T_mult, int):
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        self.T_0, self.T_i, self.T_mult, self.eta_min = T_0, T_0, T_mult, eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [self.eta_min + (base - self.eta_min)
                * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2 for base in self.base_lrs]

    def step(self, epoch: float | None = None) -> None:
        with interrupts.deferred():
            if epoch is None:
                self.T_cur += 1
                if self.T_cur >= self.T_i:
                    self.T_cur -= self.T_i
                    self.T_i *= self.T_mult
                self.last_epoch += 1
            else:
                if epoch < 0:
                    raise ValueError(f"Expected non-negative epoch, but got {epoch}")
                if epoch >= self.T_0:
                    if self.T_mult == 1:
                        self.T_cur = epoch % self.T_0
                    else:
                        n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                        self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
                        self.T_i = self.T_0 * self.T_mult ** n
                else:
                    self.T_i, self.T_cur = self.T_0, epoch
                self.last_epoch = math.floor(epoch)
            for group, lr in zip(self.optimizer.param_groups, self.get_lr()):
                group["lr"] = lr
            self._last_lr = [group["lr"] for group in self.optimizer.param_groups]


class CyclicLR(LRScheduler):
    """Cycle the learning rate between ``base_lr`` and ``max_lr`` (per batch), in PyTorch's
    modes (``triangular``, ``triangular2``, ``exp_range``), and the momentum against it.

    Examples
    --------
    >>> import pargraph
    >>> opt = pargraph.optim.SGD([pargraph.zeros(1, requires_grad=True)], lr=1.0, momentum=0.9)
    >>> sched = pargraph.optim.lr_scheduler.CyclicLR(opt, 0.1, 1.0, step_size_up=2)
    >>> [round(sched.step() or sched.get_last_lr()[0], 3) for _ in range(4)]
    [0.55, 1.0, 0.55, 0.1]
    """

    def __init__(self, optimizer: Optimizer, base_lr: Any, max_lr: Any,
                 step_size_up: int = 2000, step_size_down: int | None = None,
                 mode: str = "triangular", gamma: float = 1.0, scale_fn: Any = None,
                 scale_mode: str = "cycle", cycle_momentum: bool = True,
                 base_momentum: Any = 0.8, max_momentum: Any = 0.9,
                 last_epoch: int = -1) -> None:
        groups = optimizer.param_groups
        base_lrs = _per_group(base_lr, groups, "base_lr")
        if last_epoch == -1:
            for lr, group in zip(base_lrs, groups):
                group["lr"] = lr
        self.max_lrs = _per_group(max_lr, groups, "max_lr")
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size, self.step_ratio = up + down, up / (up + down)
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError("mode is invalid and scale_fn is None")
        self.mode, self.gamma = mode, gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode if scale_fn is not None else (
            "iterations" if mode == "exp_range" else "cycle")
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError("optimizer must support momentum or beta1 with "
                                 "`cycle_momentum` option enabled")
            self.use_beta1 = "betas" in optimizer.defaults
            self.base_momentums = _per_group(base_momentum, groups, "base_momentum")
            self.max_momentums = _per_group(max_momentum, groups, "max_momentum")
            if last_epoch == -1:
                for momentum, group in zip(self.max_momentums, groups):
                    if self.use_beta1:
                        group["betas"] = (momentum, *group["betas"][1:])
                    else:
                        group["momentum"] = momentum
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def scale_fn(self, x: float) -> float:
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma ** x

    def get_lr(self) -> list[float]:
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        scale = x / self.step_ratio if x <= self.step_ratio else (x - 1) / (self.step_ratio - 1)
        at = cycle if self.scale_mode == "cycle" else self.last_epoch
        lrs = [base + (top - base) * scale * self.scale_fn(at)
               for base, top in zip(_bases(self), self.max_lrs)]
        if self.cycle_momentum:
            for group, low, high in zip(self.optimizer.param_groups, self.base_momentums,
                                        self.max_momentums):
                momentum = high - (high - low) * scale * self.scale_fn(at)
                if self.use_beta1:
                    group["betas"] = (momentum, *group["betas"][1:])
                else:
                    group["momentum"] = momentum
        return lrs


def _bases(scheduler: CyclicLR) -> list[float]:
    # The base rates are the groups' initial ones until __init__ has set its own.
    return getattr(scheduler, "base_lrs", [g["lr"] for g in scheduler.optimizer.param_groups])


def _per_group(value: Any, groups: list, name: str) -> list[float]:
    if isinstance(value, (list, tuple)):
        if len(value) != len(groups):
            raise ValueError(f"expected {len(groups)} values for {name}, got {len(value)}")
        return list(value)
    return [value] * len(groups)


class SequentialLR(LRScheduler):
    """One scheduler after another: ``schedulers[k]`` from epoch ``milestones[k - 1]`` on.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.optim import lr_scheduler as S
    >>> opt = pargraph.optim.SGD([pargraph.zeros(1, requires_grad=True)], lr=1.0)
    >>> warm = S.ConstantLR(opt, factor=0.1, total_iters=2)
    >>> decay = S.ExponentialLR(opt, gamma=0.5)
    >>> sched = S.SequentialLR(opt, [warm, decay], milestones=[2])
    >>> [sched.step() or round(sched.get_last_lr()[0], 3) for _ in range(4)]
    [0.1, 1.0, 0.5, 0.25]
    """

    def __init__(self, optimizer: Optimizer, schedulers: list, milestones: list[int],
                 last_epoch: int = -1) -> None:
        if not schedulers:
            raise ValueError("SequentialLR expects at least one scheduler")
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(f"Sequential Schedulers expects number of schedulers provided to "
                             f"be one more than the number of milestone points, but got "
                             f"number of schedulers {len(schedulers)} and the number of "
                             f"milestones to be equal to {len(milestones)}")
        for scheduler in schedulers:
            if getattr(scheduler, "optimizer", optimizer) is not optimizer:
                raise ValueError("Sequential Schedulers expects all schedulers to belong to "
                                 "the same optimizer")
        self.optimizer, self._schedulers, self._milestones = optimizer, schedulers, milestones
        self.last_epoch = last_epoch + 1
        for group in optimizer.param_groups:  # undo what the later schedulers' set-up did
            group["lr"] = group["initial_lr"]
        for scheduler in reversed(schedulers):
            scheduler.last_epoch -= 1
        schedulers[0]._initial_step()
        self._last_lr = schedulers[0].get_last_lr()

    def step(self) -> None:
        with interrupts.deferred():
            self.last_epoch += 1
            index = bisect.bisect_right(self._milestones, self.last_epoch)
            scheduler = self._schedulers[index]
            if index > 0 and self._milestones[index - 1] == self.last_epoch:
                scheduler.last_epoch = -1  # it starts now, from its base rates
                for group, base in zip(self.optimizer.param_groups, scheduler.base_lrs):
                    group["lr"] = base
            scheduler.step()
            self._last_lr = scheduler.get_last_lr()


class ChainedScheduler(LRScheduler):
    """Several chainable schedulers stepped together: their factors multiply.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.optim import lr_scheduler as S
    >>> opt = pargraph.optim.SGD([pargraph.zeros(1, requires_grad=True)], lr=1.0)
    >>> sched = S.ChainedScheduler([S.ConstantLR(opt, factor=0.5, total_iters=1),
    ...                             S.ExponentialLR(opt, gamma=0.9)])
    >>> [round(sched.step() or sched.get_last_lr()[0], 4) for _ in range(2)]
    [0.9, 0.81]
    """

    def __init__(self, schedulers: list, optimizer: Optimizer | None = None) -> None:
        if not schedulers:
            raise ValueError("ChainedScheduler expects at least one scheduler")
        self.optimizer = optimizer or schedulers[0].optimizer
        self._schedulers = list(schedulers)
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def step(self) -> None:
        with interrupts.deferred():
            for scheduler in self._schedulers:
                scheduler.step()
            self._last_lr = [group["lr"] for group in self.optimizer.param_groups]
