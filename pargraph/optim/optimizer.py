"""The optimizer base class: parameter groups, state, and a step that is all-or-nothing.

``step()`` records every parameter's update (and new optimizer state) as graph nodes in the
``update`` phase, realizes them all in one dask run, so that the updates of independent
parameters run in parallel, and only then points parameters and state at the results. If the
run fails, parameters and state stay exactly as they were before the step. On a cluster the new
values stay on the workers, each kept on two of them, so that losing a worker loses no state;
with ``pargraph.mirror-every`` (``connect(..., mirror_every=N)``) a copy is also gathered off
the cluster every N steps, so that losing the scheduler costs at most N steps.
"""

from __future__ import annotations

import functools
import weakref
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from pargraph import ops
from pargraph._tensor import RemovableHandle, Tensor, apply
from pargraph.autograd.engine import zero_grads
from pargraph.autograd.mode import enable_grad, no_grad
from pargraph.capturing import recording
from pargraph.engine import execution, modes
from pargraph.factories import as_tensor
from pargraph.graph import REPLACED_OUTRIGHT, UPDATE, naming, recorded_at, user_site
from pargraph.interrupts import interrupts
from pargraph.ops import Primitive
from pargraph.optim.mirror import StateMirror
from pargraph.remote.recovery import mirror_every
from pargraph.remote.replication import keep_until_copied
from pargraph.remote.state import clusters
from pargraph.shared_memory import shared_tensors

_required = object()


def check_nonnegative(**values: float) -> None:
    """Raise PyTorch's error for a hyperparameter below zero (``lr``, ``eps``, ...)."""
    for name, value in values.items():
        if value < 0:
            raise ValueError(f"Invalid {name} value: {value}")


def implementation(optimizer: str, **flags: Any) -> dict:
    """PyTorch's settings of how an optimizer runs (``foreach``, ``fused``, ``capturable``,
    ``differentiable``, ``maximize``: the ones its signature has), checked as PyTorch does,
    for its defaults. pargraph records one node per formula and parameter however
    ``foreach`` and ``fused`` are set; ``maximize`` ascends; ``capturable`` is for CUDA
    graphs, and a step refuses it, as PyTorch's does with CPU tensors."""
    if flags.get("foreach") and flags.get("fused"):
        raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
    if flags.get("differentiable"):
        raise NotImplementedError(
            f"{optimizer}(differentiable=True): pargraph's optimizers update parameters "
            "outside autograd, so a step cannot be differentiated")
    return flags


def updated(prim: Primitive, *tensors: Tensor | None, **attrs: Any) -> Tensor:
    """``prim`` recorded on ``tensors`` (``None`` ones left out): one node per formula."""
    return apply(prim, *[t for t in tensors if t is not None], **attrs)


class Optimizer:
    """Base class: subclasses implement ``update(param, grad, state, group)``, returning the
    new parameter value and the new state, both as (lazy) tensors or numbers; or, as a
    PyTorch optimizer of the user's does, their own ``step`` over ``param_groups`` and
    ``state``."""

    name = "optimizer"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "step" in cls.__dict__:  # every optimizer's own step(), a user's too
            cls.step = _with_step_hooks(cls.__dict__["step"])

    def __init__(self, params: Iterable[Tensor] | Iterable[dict], defaults: dict) -> None:
        self.defaults = defaults
        self.param_groups: list[dict] = []
        # PyTorch's: ``self.state[p]`` is an empty dict the first time (an optimizer of the
        # user's, with its own ``step``, fills it there).
        self.state: defaultdict[Tensor, dict] = defaultdict(dict)
        self._step_count = 0
        #: Bumped when the layout of the state changes (which names each parameter has):
        #: a compiled step captured with another layout captures again.
        self._state_version = 0
        self._mirror: StateMirror | None = None
        params = list(params)
        if not params:
            raise ValueError("optimizer got an empty parameter list")
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        for group in groups:
            self.add_param_group(group)

    def __getstate__(self) -> dict:
        """What pickle keeps (``pargraph.save(optimizer, path)``): groups, state and counts,
        not the cluster mirror a step may have started (a thread's machinery, with a lock;
        the next step starts one again where it is asked for)."""
        state = dict(self.__dict__)
        state["_mirror"] = None
        return state

    def add_param_group(self, group: dict) -> None:
        """Add a group of parameters with their own hyperparameters."""
        params = group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        names = None
        if params and all(isinstance(p, tuple) and len(p) == 2 for p in params):
            names, params = [name for name, _ in params], [p for _, p in params]  # named
        if self.param_groups and (names is None) != ("param_names" not in self.param_groups[0]):
            raise ValueError("all optimizer param groups should be with/without names. cannot "
                             f"add param group {'without' if names is None else 'with'} names "
                             "to the optimizer")
        for k, p in enumerate(params):
            if not isinstance(p, Tensor):
                raise TypeError(f"{type(self).__name__}: parameter {k} is a "
                                f"{type(p).__name__}, expected a Tensor")
            if not p.is_leaf:
                raise ValueError(f"{type(self).__name__}: can't optimize a non-leaf Tensor "
                                 f"(parameter {k} has grad_fn={p.grad_fn.name()}); pass leaf "
                                 "tensors such as model.parameters()")
            if not p.requires_grad:
                raise ValueError(f"{type(self).__name__}: parameter {k} does not require "
                                 "gradients")
        known = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in known for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        filled = {**self.defaults, **group, "params": params}
        if names is not None:
            filled["param_names"] = names
        for key, value in filled.items():
            if value is _required:
                raise ValueError(f"{type(self).__name__}: parameter group didn't specify a "
                                 f"value of required optimization parameter {key}")
        self.param_groups.append(filled)
        self._state_version += 1

    def register_step_pre_hook(self, hook: Callable) -> RemovableHandle:
        """Call ``hook(optimizer, args, kwargs)`` before each ``step``; ``(args, kwargs)`` it
        returns replace the step's arguments.

        Examples
        --------
        >>> import pargraph
        >>> w = pargraph.ones(1, requires_grad=True)
        >>> opt, seen = pargraph.optim.SGD([w], lr=0.1), []
        >>> _ = opt.register_step_pre_hook(lambda o, args, kwargs: seen.append("pre"))
        >>> (w * 2).sum().backward(); opt.step(); seen
        ['pre']
        """
        return self._hook_in("_step_pre_hooks", hook)

    def register_step_post_hook(self, hook: Callable) -> RemovableHandle:
        """Call ``hook(optimizer, args, kwargs)`` after each ``step``."""
        return self._hook_in("_step_post_hooks", hook)

    def register_state_dict_pre_hook(self, hook: Callable, prepend: bool = False
                                     ) -> RemovableHandle:
        """Call ``hook(optimizer)`` before ``state_dict`` reads the optimizer."""
        return self._hook_in("_state_dict_pre_hooks", hook, prepend)

    def register_state_dict_post_hook(self, hook: Callable, prepend: bool = False
                                      ) -> RemovableHandle:
        """Call ``hook(optimizer, state_dict)`` on what ``state_dict`` made; a dict it
        returns replaces it."""
        return self._hook_in("_state_dict_post_hooks", hook, prepend)

    def register_load_state_dict_pre_hook(self, hook: Callable, prepend: bool = False
                                          ) -> RemovableHandle:
        """Call ``hook(optimizer, state_dict)`` before ``load_state_dict``; a dict it returns
        is loaded instead."""
        return self._hook_in("_load_state_dict_pre_hooks", hook, prepend)

    def register_load_state_dict_post_hook(self, hook: Callable, prepend: bool = False
                                           ) -> RemovableHandle:
        """Call ``hook(optimizer)`` after ``load_state_dict``."""
        return self._hook_in("_load_state_dict_post_hooks", hook, prepend)

    def _hook_in(self, table: str, hook: Callable, prepend: bool = False) -> RemovableHandle:
        hooks = self.__dict__.setdefault(table, [])
        hooks.insert(0, hook) if prepend else hooks.append(hook)
        return RemovableHandle(hooks, hook)

    def _hooks(self, table: str) -> list:
        return list(self.__dict__.get(table, ()))

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all parameters (to ``None`` by default, as in PyTorch)."""
        zero_grads([p for group in self.param_groups for p in group["params"]], set_to_none)

    def update(self, param: Tensor, grad: Tensor, state: dict, group: dict):
        raise NotImplementedError

    def step(self, closure: Callable[[], Tensor] | None = None) -> Tensor | None:
        """Update every parameter that has a gradient, in one dask run.

        All or nothing: if the run fails or is interrupted (Ctrl-C), parameters and state are
        as they were; a Ctrl-C while the results are being applied waits until they all are.
        """
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        recorder = recording.recorder  # a compiled step capturing: numbers become inputs
        if self._mirror is None and recorder is None and _on_cluster() and mirror_every():
            self._mirror = StateMirror(self)
            self._mirror.start(self._step_count)
        if any(group.get("capturable") for group in self.param_groups):
            raise AssertionError("If capturable=True, params and state_steps must be on "
                                 "supported devices: ['cuda', 'xpu', 'hpu', 'privateuseone', "
                                 "'xla'].")
        pending: list[tuple[Tensor, Tensor, dict]] = []
        # Recording changes nothing but new nodes and the recording context; a Ctrl-C waits
        # for the context's restoring (an ``__exit__`` can be interrupted as it starts).
        with interrupts.deferred(), no_grad(), naming(UPDATE, self.name), \
                recorded_at(user_site()):
            for index, group in enumerate(self.param_groups):
                hyper = group if recorder is None else \
                    recorder.hyperparameters(self, index, group)
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    state = dict(self.state.get(p, {}))
                    if recorder is not None:
                        state = recorder.optimizer_scalars(self, index, p, state)
                    grad = -p.grad if group.get("maximize") else p.grad  # as PyTorch's
                    new_param, new_state = self.update(p, grad, state, hyper)
                    pending.append((p, new_param, new_state))
        if recorder is not None:
            recorder.optimizer_step(self, pending)
        nodes = [new_param._node for _, new_param, _ in pending]
        nodes += [v._node for *_, state in pending for v in state.values()
                  if isinstance(v, Tensor)]
        replaced = [p._node.value for p, _, _ in pending]
        replaced += [v._node.value for p, _, _ in pending for v in self.state.get(p, {}).values()
                     if isinstance(v, Tensor)]
        # Raises before anything is committed. Parameters and optimizer state exist nowhere
        # else: on a cluster, a second copy is kept.
        execution.realize(nodes, replicate=nodes)
        with interrupts.deferred(), no_grad():
            for p, new_param, new_state in pending:
                p._rebind(new_param._node)
                self._commit_state(p, new_state, recorder is None)
            self._step_count += 1
            if shared_tensors:  # a shared parameter's change goes to its mapping
                shared_tensors.write_back()
        if clusters.used:
            keep_until_copied(replaced)
        if recorder is None:
            self._after_step()
        return loss

    def _commit_state(self, p: Tensor, new_state: dict, in_place: bool) -> None:
        """``p``'s state becomes ``new_state``. ``in_place``: as PyTorch's steps do, into the
        dict and the tensors it had, so that a program holding ``state[p]["exp_avg"]`` reads
        the new moments through it (a capture replaces them instead: rolled back, it puts
        the old dicts back as they were)."""
        old = self.state.get(p)
        if old is None or not in_place:
            if (old.keys() if old is not None else set()) != new_state.keys():
                self._state_version += 1
            self.state[p] = _distinct(new_state) if in_place else new_state
            return
        if old.keys() != new_state.keys():
            self._state_version += 1
            for name in [name for name in old if name not in new_state]:
                del old[name]
        rebound: set[int] = set()
        for name, value in new_state.items():
            held = old.get(name)
            # The held tensor takes the new node, as Tensor._replace does without what a
            # capture or autograd would need (state is recorded under no_grad). A tensor held
            # under two names (a capture's first Adam step) goes on under the first only.
            if held.__class__ is Tensor and value.__class__ is Tensor and held is not value \
                    and id(held) not in rebound:
                node, was = value._node, held._node
                if node.shape == was.shape and node.dtype == was.dtype:
                    was.overwritten = REPLACED_OUTRIGHT
                    held._node = node
                    node.owner = weakref.ref(held)
                    rebound.add(id(held))
                    continue
            old[name] = value
        _distinct(old)

    def _after_step(self) -> None:
        """What follows every step, replayed ones too: the mirror's copy, when it is due."""
        if self._mirror is not None and mirror_every():
            self._mirror.after_step(self._step_count)

    def state_dict(self) -> dict:
        """``{"state": {index: {...}}, "param_groups": [{..., "params": [indices]}]}``."""
        for hook in self._hooks("_state_dict_pre_hooks"):
            hook(self)
        index = {}
        groups = []
        for group in self.param_groups:
            ids = []
            for p in group["params"]:
                index.setdefault(id(p), len(index))
                ids.append(index[id(p)])
            groups.append({**{k: v for k, v in group.items() if k != "params"}, "params": ids})
        state = {}
        builtin = type(self).__module__.startswith("pargraph.")  # its step count is an int
        for group in self.param_groups:
            for p in group["params"]:
                if p in self.state:
                    state[index[id(p)]] = {k: _saved(k, v, builtin)
                                           for k, v in self.state[p].items()}
        made = {"state": state, "param_groups": groups}
        for hook in self._hooks("_state_dict_post_hooks"):
            returned = hook(self, made)
            if returned is not None:
                made = returned
        return made

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore hyperparameters and state saved by ``state_dict``."""
        for hook in self._hooks("_load_state_dict_pre_hooks"):
            returned = hook(self, state_dict)
            if returned is not None:
                state_dict = returned
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise ValueError(f"loaded state dict has {len(groups)} parameter groups, the "
                             f"optimizer has {len(self.param_groups)}")
        for k, (saved, own) in enumerate(zip(groups, self.param_groups)):
            if len(saved["params"]) != len(own["params"]):
                raise ValueError(f"loaded state dict contains a parameter group {k} of size "
                                 f"{len(saved['params'])} that doesn't match the size of "
                                 f"optimizer's group ({len(own['params'])})")
        state = {int(k): v for k, v in state_dict["state"].items()}
        # Everything is converted before anything changes: a bad value leaves the optimizer
        # as it was.
        new_state: dict[Tensor, dict] = {}
        for saved, own in zip(groups, self.param_groups):
            for index, p in zip(saved["params"], own["params"]):
                if int(index) in state:
                    new_state[p] = {k: _restore(v, p, f"state[{index}][{k!r}]", k)
                                    for k, v in state[int(index)].items()}
        with interrupts.deferred():
            for saved, own in zip(groups, self.param_groups):
                own.update({k: v for k, v in saved.items() if k != "params"})
            self.state = defaultdict(dict, new_state)
            self._state_version += 1
        for hook in self._hooks("_load_state_dict_post_hooks"):
            hook(self)

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for k, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {k}")
            lines += [f"    {key}: {value}" for key, value in sorted(group.items())
                      if key != "params"]
        return "\n".join(lines + [")"])


def _distinct(state: dict) -> dict:
    """``state`` with each tensor under one name only: a formula may keep one tensor under
    two names (Adam's first ``max_exp_avg_sq`` is its ``exp_avg_sq``), where PyTorch's
    state holds two tensors, which later steps change one at a time."""
    seen: set[int] = set()
    for name, value in state.items():
        if isinstance(value, Tensor):
            if id(value) in seen:
                state[name] = Tensor(value._node)
            seen.add(id(value))
    return state


def _saved(name: str, value: Any, builtin: bool = True) -> Any:
    """A state value as PyTorch's ``state_dict`` holds it: tensors detached, the step count
    of pargraph's own optimizers a 0-d float32 tensor (they count in an int, which compiled
    steps bind as a number; a user's optimizer keeps what it stored)."""
    if isinstance(value, Tensor):
        return value.detach()
    if builtin and name == "step" and type(value) is int:
        return as_tensor(float(value), dtype=np.float32)
    return value


def _with_step_hooks(step: Callable) -> Callable:
    """``step`` running the optimizer's step pre- and post-hooks around it (once, when an
    optimizer's step calls its base class's)."""
    @functools.wraps(step)
    def hooked(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self.__dict__.get("_in_step") or not (self.__dict__.get("_step_pre_hooks") or
                                                 self.__dict__.get("_step_post_hooks")):
            return step(self, *args, **kwargs)
        recorder = recording.recorder
        if recorder is not None:  # the hooks are the user's Python, which replays skip
            recorder.stop(f"{type(self).__name__} has step hooks, which a replay would not "
                          "call")
        for hook in self._hooks("_step_pre_hooks"):
            returned = hook(self, args, kwargs)
            if returned is not None:
                if not (isinstance(returned, tuple) and len(returned) == 2):
                    raise RuntimeError("optimizer step pre-hook must return None or a tuple of "
                                       f"(new_args, new_kwargs), but got {returned}.")
                args, kwargs = returned
        self._in_step = True
        try:
            result = step(self, *args, **kwargs)
        finally:
            self._in_step = False
        for hook in self._hooks("_step_post_hooks"):
            hook(self, args, kwargs)
        return result
    return hooked


Optimizer.step = _with_step_hooks(Optimizer.step)  # type: ignore[method-assign]


def _restore(value: Any, param: Tensor, where: str, name: str = "") -> Any:
    if isinstance(value, (int, float)) or value is None:
        return value
    if name == "step" and getattr(value, "shape", None) in ((), (1,)):
        return int(float(value))  # PyTorch's 0-d tensor: counted in an int again
    try:
        restored = as_tensor(value)
    except (TypeError, ValueError) as error:
        raise ValueError(f"loaded optimizer state: invalid value for {where}: {error}") from None
    if restored.shape != param.shape and restored.numel() != 1:
        raise ValueError(f"loaded optimizer state: {where} has shape {restored.shape}, the "
                         f"parameter has shape {param.shape}")
    return restored.to(param.dtype) if ops.is_floating(restored.dtype) else restored


required = _required


def _on_cluster() -> bool:
    """Whether this process's runs went, or the next one goes, to a cluster: only then does
    a mirror of the training state have anything to copy."""
    return clusters.used or modes.client_of(modes.choose_scheduler()) is not None
