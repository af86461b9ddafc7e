"""Averages of a model's weights over training, with PyTorch's names
(``torch.optim.swa_utils``): ``AveragedModel`` keeps a copy of a model whose parameters are
a running average of the model's (stochastic weight averaging, or an exponential moving
average), ``SWALR`` anneals the learning rate to a constant, and ``update_bn`` recomputes
BatchNorm's statistics for averaged weights."""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from pargraph import factories
from pargraph._tensor import Tensor
from pargraph.autograd.mode import no_grad
from pargraph.nn.module import Module
from pargraph.nn.modules.batchnorm import _BatchNorm
from pargraph.optim.lr_scheduler import LRScheduler
from pargraph.optim.optimizer import Optimizer

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn",
           "get_swa_multi_avg_fn", "get_ema_avg_fn", "get_swa_avg_fn"]


def _decay_checked(decay: float) -> None:
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in "
                         "[0,1] range.")


def get_ema_multi_avg_fn(decay: float = 0.999) -> Callable:
    """The exponential moving average of lists of parameters, updated in place:
    ``ema = decay * ema + (1 - decay) * current``.

    Examples
    --------
    >>> import pargraph
    >>> ema = [pargraph.zeros(1)]
    >>> pargraph.optim.swa_utils.get_ema_multi_avg_fn(0.75)(ema, [pargraph.ones(1)], 1)
    >>> ema[0].tolist()
    [0.25]
    """
    _decay_checked(decay)

    def ema_update(ema_params: list, current_params: list, _: Any) -> None:
        with no_grad():
            for ema, current in zip(ema_params, current_params, strict=True):
                if ema.is_floating_point():
                    ema.lerp_(current, 1 - decay)
                else:
                    ema.copy_(ema * decay + current * (1 - decay))
    return ema_update


def get_swa_multi_avg_fn() -> Callable:
    """The equally weighted average of lists of parameters, updated in place: after ``n``
    models, ``avg += (current - avg) / (n + 1)``.

    Examples
    --------
    >>> import pargraph
    >>> avg = [pargraph.ones(1)]
    >>> pargraph.optim.swa_utils.get_swa_multi_avg_fn()(avg, [pargraph.ones(1) * 4], 2)
    >>> avg[0].tolist()
    [2.0]
    """
    def swa_update(averaged_params: list, current_params: list, num_averaged: Any) -> None:
        with no_grad():
            models = _count(num_averaged) + 1
            for averaged, current in zip(averaged_params, current_params, strict=True):
                if averaged.is_floating_point():
                    averaged.lerp_(current, 1 / models)
                else:
                    averaged.copy_(averaged + (current - averaged) / models)
    return swa_update


def get_ema_avg_fn(decay: float = 0.999) -> Callable:
    """The exponential moving average of one parameter, as a new tensor.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.optim.swa_utils.get_ema_avg_fn(0.5)(pargraph.zeros(1), pargraph.ones(1), 1)
    tensor([0.5000])
    """
    _decay_checked(decay)

    def ema_update(ema_param: Tensor, current_param: Tensor, num_averaged: Any) -> Tensor:
        with no_grad():
            return decay * ema_param + (1 - decay) * current_param
    return ema_update


def get_swa_avg_fn() -> Callable:
    """The equally weighted average of one parameter, as a new tensor.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.optim.swa_utils.get_swa_avg_fn()(pargraph.ones(1), pargraph.ones(1) * 4, 2)
    tensor([2.])
    """
    def swa_update(averaged_param: Tensor, current_param: Tensor, num_averaged: Any) -> Tensor:
        with no_grad():
            return averaged_param + (current_param - averaged_param) / (num_averaged + 1)
    return swa_update


def _count(num_averaged: Any) -> int:
    return int(num_averaged.item()) if isinstance(num_averaged, Tensor) else int(num_averaged)


class AveragedModel(Module):
    """A copy of ``model`` whose parameters are the average of ``model``'s over the calls of
    :meth:`update_parameters`: equally weighted by default (stochastic weight averaging), or
    as ``avg_fn(averaged, current, n_averaged)`` (a new tensor per parameter) or
    ``multi_avg_fn(averaged_list, current_list, n_averaged)`` (in place) compute it.
    ``use_buffers``: average the buffers too (else they are copied from ``model``).

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
    >>> model = pargraph.nn.Linear(1, 1, bias=False)
    >>> ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.5))
    >>> with pargraph.no_grad():
    ...     _ = model.weight.fill_(2.0); ema.update_parameters(model)
    ...     _ = model.weight.fill_(4.0); ema.update_parameters(model)
    >>> ema.module.weight.item(), int(ema.n_averaged)
    (3.0, 2)
    """

    def __init__(self, model: Module, device: Any = None, avg_fn: Callable | None = None,
                 multi_avg_fn: Callable | None = None, use_buffers: bool = False) -> None:
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", factories.tensor(0, dtype=np.int64))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.module(*args, **kwargs)

    def update_parameters(self, model: Module) -> None:
        """Average ``model``'s current parameters in (the first call copies them)."""
        mine = itertools.chain(self.module.parameters(), self.module.buffers()) \
            if self.use_buffers else self.parameters()
        theirs = itertools.chain(model.parameters(), model.buffers()) \
            if self.use_buffers else model.parameters()
        averaged, current = [], []
        for p_averaged, p_model in zip(mine, theirs):
            averaged.append(p_averaged.detach())
            current.append(p_model.detach())
        count = _count(self.n_averaged)
        with no_grad():
            if count == 0:
                for a, c in zip(averaged, current):
                    a.copy_(c)
            elif self.avg_fn is not None:
                for a, c in zip(averaged, current):
                    a.copy_(self.avg_fn(a, c, self.n_averaged))
            else:
                (self.multi_avg_fn or get_swa_multi_avg_fn())(averaged, current,
                                                              self.n_averaged)
            if not self.use_buffers:  # the buffers follow the model's
                for b_averaged, b_model in zip(self.module.buffers(), model.buffers(),
                                               strict=True):
                    b_averaged.detach().copy_(b_model.detach())
            self.n_averaged.fill_(count + 1)


def update_bn(loader: Iterable, model: Module, device: Any = None) -> None:
    """Recompute the running statistics of ``model``'s BatchNorm layers in one pass over
    ``loader`` (batches, or tuples whose first element is the input), as a cumulative
    average; the model's other state and its mode are kept.

    Examples
    --------
    >>> import pargraph
    >>> model = pargraph.nn.BatchNorm1d(1)
    >>> pargraph.optim.swa_utils.update_bn([pargraph.ones(4, 1) * 3], model)
    >>> model.running_mean.tolist()
    [3.0]
    """
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    with no_grad():
        for batch in loader:
            if isinstance(batch, (list, tuple)):
                batch = batch[0]
            if device is not None:
                batch = batch.to(device)
            model(batch)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneals each group's learning rate to ``swa_lr`` over ``anneal_epochs`` epochs
    (cosine or linear), then keeps it there.

    Examples
    --------
    >>> import pargraph
    >>> opt = pargraph.optim.SGD([pargraph.zeros(1, requires_grad=True)], lr=1.0)
    >>> sched = pargraph.optim.swa_utils.SWALR(opt, swa_lr=0.5, anneal_epochs=2,
    ...                                        anneal_strategy="linear")
    >>> [round(sched.get_last_lr()[0], 4) for _ in range(3) if sched.step() is None]
    [0.75, 0.5, 0.5]
    """

    def __init__(self, optimizer: Optimizer, swa_lr: Any, anneal_epochs: int = 10,
                 anneal_strategy: str = "cos", last_epoch: int = -1) -> None:
        swa_lrs = list(swa_lr) if isinstance(swa_lr, (list, tuple)) \
            else [swa_lr] * len(optimizer.param_groups)
        if len(swa_lrs) != len(optimizer.param_groups):
            raise ValueError(f"{len(optimizer.param_groups)} values for swa_lr were expected, "
                             f"got {len(swa_lrs)}")
        for value, group in zip(swa_lrs, optimizer.param_groups):
            group["swa_lr"] = value
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError("anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        self._anneal_strategy = anneal_strategy
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got "
                             f"{anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    def _anneal(self, t: float) -> float:
        return (1 - math.cos(math.pi * t)) / 2 if self._anneal_strategy == "cos" else t

    def get_lr(self) -> list[float]:
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        previous = self._anneal(max(0, min(1, (step - 1) / max(1, self.anneal_epochs))))
        # The rate the annealing started from, recovered from the current one.
        starts = [group["swa_lr"] if previous == 1 else
                  (group["lr"] - previous * group["swa_lr"]) / (1 - previous)
                  for group in self.optimizer.param_groups]
        alpha = self._anneal(max(0, min(1, step / max(1, self.anneal_epochs))))
        return [group["swa_lr"] * alpha + start * (1 - alpha)
                for group, start in zip(self.optimizer.param_groups, starts)]
