"""A compiled step's capture: the recorder installed while the step runs once, which queues
every realization, notes what the step reads and writes (tensors, ``.grad``, modules' buffers
and attributes, optimizers' settings and steps, random draws) and makes the program."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from pargraph import ops
from pargraph._tensor import Tensor
from pargraph.capturing import Symbol, recording
from pargraph.compiler.guards import ABSENT, GraphBreak, argument_guard, module_constants, name_of
from pargraph.compiler.program import Program
from pargraph.compiler.record import Compiling, OptimizerRecord, Record
from pargraph.compiler.writes import Writes, land
from pargraph.engine import execution
from pargraph.engine.lowering import plan
from pargraph.graph import (
    Node,
    format_site,
    uid_mark,
    user_site,
)
from pargraph.interrupts import interrupts
from pargraph.nn.module import Module
from pargraph.pytree import flatten, unflatten

# --- capture ----------------------------------------------------------------------------------


class Capture(Record):
    """The recorder of one capturing call (see :mod:`pargraph.capturing` for the hooks),
    filling its :class:`~pargraph.compiler.record.Record` as the call runs."""

    def __init__(self, compiled: Compiling, flat: list) -> None:
        super().__init__(compiled)
        self.live = True
        self.broken: str | None = None
        self.argument_guards = [argument_guard(v) for v in flat]
        execution.flush()  # work deferred before the call is not the call's own
        self.arguments = []
        for i, value in enumerate(flat):
            if type(value) in (int, float):
                value = self.symbols.leaf(("arg", i), value)
            elif isinstance(value, Tensor) and value._node.history:
                self.stop(f"argument {i} has autograd history from outside the function "
                          "(pass it detached, or compile the function that makes it too)")
            elif isinstance(value, Tensor) and value._node.value is None:
                execution.realize([value._node])
            self.arguments.append(value)
        self.argument_nodes = {id(v._node): i for i, v in enumerate(flat)
                               if isinstance(v, Tensor)}
        self.mark = uid_mark()

    def __enter__(self) -> Capture:
        return self

    def __exit__(self, kind: Any, error: Any, traceback: Any) -> None:
        """The capturing call failed or was interrupted anywhere, from the function's first
        line to the program's landing: put back what it changed (but after a graph break,
        the call ran eagerly from there on: its nodes only get their plain numbers back). It
        runs inside the capture's ``interrupts.failsafe()`` block: a second Ctrl-C waits for
        its end, or nodes would keep symbols."""
        if kind is not None:
            (self.rollback if self.broken is None else self._plain)()

    def call(self, fn: Callable, spec: Any) -> Any:
        """``fn`` on the call's arguments with this capture installed."""
        self.argument_spec = spec
        args, kwargs = unflatten(spec, iter(self.arguments))
        recording.recorder = self
        try:
            return fn(*args, **kwargs)
        finally:
            recording.recorder = None

    # hooks -------------------------------------------------------------------------------

    def stop(self, reason: str) -> None:
        """Stop capturing: the rest of the call runs eagerly, and so do later calls."""
        if not self.live:
            return
        if self.compiled.fullgraph:  # raises; the capturing call puts back what it changed
            raise GraphBreak(f"pargraph.compile({name_of(self.compiled.fn)}, fullgraph=True): "
                             f"{reason}")
        with interrupts.deferred():
            self.live = False
            self.broken = reason
            self._plain()
        warnings.warn(f"pargraph.compile: {name_of(self.compiled.fn)} is not captured: {reason}; "
                      "it runs eagerly from now on", stacklevel=4)
        self._run_queued()

    def _run_queued(self) -> None:
        """Run what the capture held back, as the eager call would have by now."""
        queued, self.queued = self.queued, []
        recorder, recording.recorder = recording.recorder, None
        try:
            execution.realize(queued, replicate=self.state_nodes)
        finally:
            recording.recorder = recorder

    def realize(self, targets: list[Node], replicate: Any) -> bool:
        if not self.live:
            return False
        self.queued += targets
        self.state_nodes += replicate
        return True

    def read(self, node: Node) -> None:
        if self.live:
            self.stop(f"it reads a value at {format_site(user_site())}")

    def scheduler_stepped(self, scheduler: Any) -> None:
        if self.live:
            self.stop(f"{type(scheduler).__name__}.step() runs at {format_site(user_site())}, "
                      "and a replay would not move the learning rate again (call it after "
                      "the compiled function)")

    def rebound(self, tensor: Tensor, old: Node) -> None:
        if self.live and id(tensor) not in self.rebinds and old.uid < self.mark:
            self.rebinds[id(tensor)] = (tensor, old)

    def grad_set(self, tensor: Tensor) -> None:
        if self.live and id(tensor) not in self.grads:
            grad = tensor.grad
            self.grads[id(tensor)] = (tensor, grad, grad._node if grad is not None else None)

    def random(self, node: Node, draw: Callable) -> None:
        if self.live:
            self.draws[id(node)] = (node, draw)

    def module_called(self, module: Module) -> None:
        if self.live and id(module) not in self.modules:
            self.modules[id(module)] = (module, module.training)
            self.module_constants[id(module)] = (module, module_constants(module))
            object.__setattr__(module, "_pargraph_captured", True)

    def buffer_set(self, module: Module, name: str) -> None:
        if self.live and (id(module), name) not in self.buffers:
            self.buffers[id(module), name] = (module, name, module._buffers.get(name))

    def attribute_set(self, module: Module, name: str) -> None:
        if self.live and (id(module), name) not in self.module_attributes:
            self.module_attributes[id(module), name] = (module, name,
                                                        module.__dict__.get(name, ABSENT))

    def symbolic_call(self, prim: ops.Primitive, inputs: tuple, attrs: dict) -> Node:
        """Record ``prim`` on plain numbers (its shape rule sees values); the node keeps the
        symbols until the program binds them."""
        node = prim(*self.symbols.unwrap(inputs), **self.symbols.unwrap(attrs))
        if self.live:
            self.symbolic[id(node)] = node  # first: _plain() finds it whatever comes next
            node.inputs, node.attrs = inputs, attrs
        return node

    def keeps_templates(self, order: list[Node]) -> bool:
        """Whether a backward through ``order`` may use the template cache: not with symbols
        in it (a template would keep them as constants)."""
        return not self.live or not any(id(node) in self.symbolic for node in order)

    def _plain(self) -> None:
        """Give the symbolic nodes their plain numbers back (to run eagerly, or for good)."""
        unwrap = self.symbols.unwrap
        for node in self.symbolic.values():
            node.inputs, node.attrs = unwrap(node.inputs), unwrap(node.attrs)

    def hyperparameters(self, optimizer: Any, index: int, group: dict) -> dict:
        """``group`` with symbols for its numbers (read from the group at each replay)."""
        if not self.live:
            return group
        symbolic = {}
        for name, value in group.items():
            if type(value) in (int, float):
                value = self._leaf(("group", id(optimizer), index, name), value,
                                   lambda o=optimizer, i=index, n=name: o.param_groups[i][n])
            elif type(value) is tuple and all(type(v) in (int, float) for v in value):
                value = tuple(self._leaf(("group", id(optimizer), index, name, k), v,
                                         lambda o=optimizer, i=index, n=name, k=k:
                                         o.param_groups[i][n][k])
                              for k, v in enumerate(value))
            symbolic[name] = value
        return symbolic

    def optimizer_scalars(self, optimizer: Any, index: int, param: Tensor,
                          state: dict) -> dict:
        """A parameter's optimizer state with symbols for its numbers (a step count), shared
        by the parameters of a group that have the same value."""
        if not self.live:
            return state
        return {name: self._shared_leaf(optimizer, index, param, name, value)
                if type(value) in (int, float) else value for name, value in state.items()}

    def _shared_leaf(self, optimizer: Any, index: int, param: Tensor, name: str,
                     value: Any) -> Symbol:
        """The symbol of a number of ``param``'s optimizer state, one for the parameters of
        its group that have the same value now; a replay reads them all and fails its guard
        when they have come apart (a parameter frozen for some steps lags in its count)."""
        key = ("state", id(optimizer), index, name, value)
        sharing = self.sharing.setdefault(key, [])
        sharing.append(param)

        def read(o=optimizer, params=sharing, n=name) -> Any:
            first = o.state[params[0]][n]
            for p in params[1:]:
                if o.state[p][n] != first:
                    raise KeyError(n)
            return first

        return self._leaf(key, value, read)

    def _leaf(self, key: Any, value: Any, reader: Callable[[], Any]) -> Any:
        self.readers.setdefault(key, reader)
        return self.symbols.leaf(key, value)

    def optimizer_step(self, optimizer: Any, pending: list) -> None:
        """An optimizer stepped: its state's numbers become plain again (a replay sets them),
        and it is told what the program reads and writes of it."""
        record = self.optimizers.get(id(optimizer))
        if record is None:
            record = self.optimizers[id(optimizer)] = OptimizerRecord(optimizer)
        if not self.live:
            record.stepped += 1
            for _, _, new_state in pending:
                for name, value in new_state.items():
                    if type(value) is Symbol:
                        new_state[name] = value.value
            return
        record.stepped += 1
        record.grads = {id(p): p.grad is None for group in optimizer.param_groups
                        for p in group["params"]}
        for p, _, new_state in pending:
            for name, value in optimizer.state.get(p, {}).items():
                if isinstance(value, Tensor):
                    record.reads.setdefault(id(value._node), (value._node, p, name))
            seen: set[int] = set()
            for name, value in new_state.items():
                if type(value) is Symbol:
                    record.scalars.append((p, name, value))
                    new_state[name] = value.value
                elif isinstance(value, Tensor):
                    if id(value) in seen:  # one tensor under two names (amsgrad's first step):
                        value = new_state[name] = Tensor(value._node)  # replays set each
                    seen.add(id(value))
                    record.writes[(id(p), name)] = (p, name)

    # the end -----------------------------------------------------------------------------

    def rollback(self) -> None:
        """The capturing call failed or was interrupted: put every tensor, ``.grad``, buffer
        and optimizer state it changed back as they were, and drop the work it held back,
        so that the call changed nothing (all old)."""
        self.live = False
        self._plain()
        self.queued = []
        execution.take_deferred()  # the backward() calls of the function
        for tensor, old in self.rebinds.values():
            land(tensor, old)
            old.overwritten = False  # its tensor's value again
        for p, before, node in self.grads.values():
            p.grad = before
            if before is not None and node is not None and before._node is not node:
                land(before, node)
                node.overwritten = False
        for module, name, before in self.buffers.values():
            module._buffers[name] = before
        for module, name, before in self.module_attributes.values():
            if before is ABSENT:
                module.__dict__.pop(name, None)
            else:
                object.__setattr__(module, name, before)
        for record in self.optimizers.values():
            record.restore()

    def finish(self, result: Any) -> tuple[Program, Any]:
        """Build the program of the captured call, run it, and land its results."""
        self.live = False
        taken = execution.take_deferred()
        targets = list(self.queued)
        state = list(self.state_nodes)
        for entry_targets, _, _ in taken.entries:
            targets += entry_targets
        state += taken.state
        flat, spec = flatten(result)
        writes = Writes(self, flat)
        targets += writes.nodes()
        order, computed = plan(targets)
        before = [node for node in computed if node.uid < self.mark]
        if before:  # recorded before the call (an init under no_grad): the call's inputs
            execution.realize(before)
            order, computed = plan(targets)
        program = Program(self, order, computed, writes, flat, spec, state)
        self._plain()
        result = program.replay(None, [], first=True)
        program.forget_inputs(order)
        return program, result
