"""Learning-rate schedulers: ``StepLR`` and ``CosineAnnealingLR``."""

from __future__ import annotations

import math

from pargraph.optim.optimizer import Optimizer


class LRScheduler:
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
        self.last_epoch += 1
        for group, lr in zip(self.optimizer.param_groups, self.get_lr()):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def get_last_lr(self) -> list[float]:
        return list(self._last_lr)

    def state_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update(state_dict)


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
