"""Copies of an optimizer's parameters and state off the cluster, so a scheduler loss costs at
most ``pargraph.mirror-every`` steps.

On a cluster, parameters and optimizer state live only on the workers; replication protects
them from a worker's death, not from the scheduler's. Every N-th step the mirror asks the
cluster for the values it just committed, on a thread of its own, so the gather overlaps the
next steps instead of delaying them. When the cluster is lost, the execution layer calls
:meth:`StateMirror.recover`, which points the parameters and the optimizer state back at the
last complete copy.
"""

from __future__ import annotations

import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from pargraph._tensor import Tensor
from pargraph.autograd.mode import no_grad
from pargraph.context import context
from pargraph.engine import execution
from pargraph.factories import as_tensor
from pargraph.remote.layout import is_future
from pargraph.remote.recovery import local_copies, mirror_every, register_recovery

_gatherers = context.register(
    "mirror_gatherers", ThreadPoolExecutor(max_workers=1, thread_name_prefix="pargraph-mirror"))


class StateMirror:
    """The last complete copy of one optimizer's parameters and state, taken every N steps."""

    def __init__(self, optimizer: Any) -> None:
        self.optimizer_ref = weakref.ref(optimizer)  # the optimizer holds its mirror
        self.copy: tuple[int, list, list] | None = None  # (step, params, states), all numpy
        self.in_flight = None
        self.restored_step: int | None = None  # the copy's step, once it was put back
        self.lock = threading.Lock()
        register_recovery(self)

    def start(self, step: int) -> None:
        """The first copy, taken now, before the first mirrored step runs: the values it
        starts from are usually in this process still (they were sent with the first run),
        so a scheduler lost before step N rolls back to them, not to nothing."""
        optimizer = self.optimizer_ref()
        values = [t._node for group in optimizer.param_groups for p in group["params"]
                  for t in (p, *optimizer.state.get(p, {}).values())
                  if isinstance(t, Tensor) and t._node.value is None]
        if values:  # parameters made by ops not run yet (an initialization)
            execution.realize(values)
        self._gather(step, *self._current())

    def after_step(self, step: int) -> None:
        """Start gathering this step's values if it is a mirrored step and they are remote."""
        every = mirror_every()
        if not every or step % every:
            return
        held, held_states, futures = self._current()
        if not futures:
            return  # nothing lives on a cluster
        if self.in_flight is not None and not self.in_flight.done():
            return  # the previous copy is still on its way: skip this one, not the step
        self.in_flight = _gatherers.submit(self._gather, step, held, held_states, futures)

    def _current(self) -> tuple[list, list, list]:
        """The optimizer's parameter and state values now (later steps rebind the tensors
        while a copy travels), and the Futures among them."""
        optimizer = self.optimizer_ref()
        params = [p for group in optimizer.param_groups for p in group["params"]]
        held = [p._node.value for p in params]
        held_states = [{k: v._node.value if isinstance(v, Tensor) else v
                        for k, v in optimizer.state.get(p, {}).items()} for p in params]
        futures = [v for v in held + [v for state in held_states for v in state.values()]
                   if is_future(v)]
        return held, held_states, futures

    def _gather(self, step: int, held: list, held_states: list, futures: list) -> None:
        copies = iter(local_copies(held + [v for state in held_states for v in state.values()],
                                   futures))
        copy = (step, [next(copies) for _ in held],
                [{k: next(copies) for k in state} for state in held_states])
        with self.lock:
            self.copy = copy

    def recover(self, client: Any) -> tuple[str, dict]:
        """Point every parameter whose value (or state) was lost with ``client``'s cluster
        back at the last copy; return what was restored and, for each lost Future, the value
        that replaces it."""
        with self.lock:
            copy = self.copy
        optimizer = self.optimizer_ref()
        if copy is None or optimizer is None:
            return "", {}
        step, param_values, state_values = copy
        params = [p for group in optimizer.param_groups for p in group["params"]]
        restored = 0
        replaced: dict[str, np.ndarray] = {}
        with no_grad():
            for p, value, state in zip(params, param_values, state_values):
                old_state = optimizer.state.get(p, {})
                lost = {k: v._node.value.key for k, v in old_state.items()
                        if isinstance(v, Tensor) and _held_by(v._node.value, client)}
                if not _held_by(p._node.value, client) and not lost:
                    continue  # recovered already, or never on that cluster
                if is_future(p._node.value):
                    replaced[p._node.value.key] = value
                replaced.update({key: state[k] for k, key in lost.items() if k in state})
                p._rebind(as_tensor(value)._node)
                p.grad = None  # gradients lived on the lost cluster too
                optimizer.state[p] = {k: as_tensor(v) if isinstance(v, np.ndarray) else v
                                      for k, v in state.items()}
                if not state:
                    del optimizer.state[p]
                restored += 1
        name = type(optimizer).__name__
        if not restored:
            if self.restored_step is None:
                return "", {}
            return f"{name}'s parameters and state as of its step {self.restored_step}", {}
        optimizer._step_count = self.restored_step = step
        return f"{name}'s parameters and state as of its step {step}", replaced


def _held_by(value: Any, client: Any) -> bool:
    return is_future(value) and value.client is client
