"""A compiled step's program: ``pargraph.compile(train_step)`` records a step once and
replays it.

The first call with new guards *captures*: it runs the function with a recorder installed
(:mod:`pargraph.capturing`), so that nothing runs until the function returns. Then the whole
call is one graph: every ``optimizer.step()``, ``backward()`` and returned tensor of it. That
graph is partitioned once into group tasks, as a run is (:mod:`pargraph.engine.lowering`), and kept
as a :class:`Program`:

- *slots*: where its leaves come from at each call (an argument, a tensor the function read,
  a parameter, a ``.grad``, an optimizer's state by its path, a random draw, a constant made
  inside the function);
- *writes*: which tensors, ``.grad`` and optimizer states get its results;
- *symbols*: the Python numbers it takes as inputs (scalar arguments, learning rates, step
  counts), which it binds into the literals and attributes of its nodes at each call.

A later call whose guards hold binds the current values into the slots, runs the group
tasks (on pargraph's threads or in this thread, whichever was faster; or on the cluster),
and lands the results: no recording, no backward construction, no lowering. Results land
inside ``interrupts.deferred()``: a Ctrl-C leaves the state all old or all new.
"""

from __future__ import annotations

import contextlib
import re
import sys
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from pargraph import ops
from pargraph._tensor import Tensor
from pargraph.capturing import Symbol
from pargraph.compiler.guards import FAILED, Guards, name_of
from pargraph.compiler.record import Record, settings_of
from pargraph.compiler.tasks import HeldProgram, run_held, run_held_group
from pargraph.compiler.writes import (
    CONSTANT,
    DRAW,
    GRAD,
    STATE,
    TENSOR,
    Writes,
    land,
    leaf_origins,
    leaf_slot,
    placeholder,
    reference_baseline,
    slot_name,
    slot_node,
)
from pargraph.engine import execution, lowering, modes
from pargraph.engine.lowering import GroupPlan, SinglePlan, make_plan
from pargraph.engine.threads import run_on_threads
from pargraph.graph import (
    FORWARD,
    Node,
    renew_all,
)
from pargraph.in_place import InPlaceUpdates
from pargraph.interrupts import interrupts
from pargraph.pytree import unflatten
from pargraph.remote import programs
from pargraph.remote.recovery import fetch
from pargraph.remote.replication import keep_until_copied
from pargraph.remote.workers import threads_by_worker
from pargraph.runtime import LIT, Arg, FusedTask, allocator, node_by_node, straight_line
from pargraph.shared_memory import shared_tensors


class Program:
    """A captured call: its slots, group tasks, symbols and writes (see the module's
    docstring)."""

    def __init__(self, capture: Record, order: list[Node], computed: list[Node],
                 writes: Writes, result: list, spec: Any, state: list[Node]) -> None:
        self.name = name_of(capture.compiled.fn)
        self.failed: str | None = None
        self.lock = threading.Lock()
        # The returned tensors land anew at each call: only the other values are kept.
        self.result_spec = spec
        self.result = [None if isinstance(v, Tensor) else v for v in result]
        self.guards = Guards(capture)
        self.optimizers = list(capture.optimizers.values())
        self.symbols = capture.symbols
        self.grad_guards = self._grad_guards(capture)
        self.slots = self._slots(capture, order)
        outputs = [node for node in writes.nodes() if node.value is None]
        outputs = list(dict.fromkeys(outputs))  # each once, in order
        self.computed = computed
        self.state_ids = {id(node) for node in state}
        self._compile(order, computed, outputs, capture, writes)
        self._prepare_landing(writes, outputs, [order[k] for k in self.leaf_positions])

    # building ----------------------------------------------------------------------------

    def _grad_guards(self, capture: Record) -> list:
        """Whether a ``.grad`` was None when the call began: for those the call made (a replay
        with one there would have to add to it), and for the parameters an optimizer stepped
        that the call did not touch."""
        guards = [(p, True) for p, before, _ in capture.grads.values() if before is None]
        for record in capture.optimizers.values():
            for group in record.optimizer.param_groups:
                for p in group["params"]:
                    if id(p) not in capture.grads:
                        guards.append((p, record.grads.get(id(p), p.grad is None)))
        return guards

    def _slots(self, capture: Record, order: list[Node]) -> list[tuple]:
        """Where each leaf of ``order`` comes from at each call."""
        origins = leaf_origins(capture)
        #: Every random draw of the call, in its order: a replay draws them all again.
        self.draws = [draw for _, draw in capture.draws.values()]
        slots, self.leaf_positions = [], []
        for k, node in enumerate(order):
            if node.value is None:
                continue
            self.leaf_positions.append(k)
            found = leaf_slot(node, capture, origins)
            if found[0] == CONSTANT:
                found = (CONSTANT, node.value)
            slots.append((*found, node.shape, node.dtype))
        #: The capturing call's own values, for its run (its tensors point at new nodes).
        self.first_values = [order[k].value for k in self.leaf_positions]
        #: Each leaf's ``requires_grad`` (a parameter frozen since is another program).
        self.slot_requires_grad = [order[k].requires_grad for k in self.leaf_positions]
        return slots

    def _compile(self, order: list[Node], computed: list[Node], outputs: list[Node],
                 capture: Record, writes: Writes) -> None:
        get = modes.choose_scheduler()
        client = modes.client_of(get)
        granularity = modes.granularity(get, client)
        self.remote, self.granularity = granularity.remote, granularity
        slot = {k: s for s, k in enumerate(self.leaf_positions)}
        #: The updates that run after the group tasks, into the arrays they replace.
        self.in_place = None if self.remote else InPlaceUpdates.of(
            computed, outputs, {id(order[k]): s for k, s in slot.items()},
            self._replaced(writes, order))
        if self.in_place is not None:
            computed, outputs = self.in_place.computed, self.in_place.plan_outputs
        made = make_plan(order, computed, outputs, granularity)
        self.plan = made
        if isinstance(made, SinglePlan):
            task = FusedTask(computed, lowering._with_literals(made.sources, made.literal,
                                                               computed),
                             made.outputs, made.release)
            self.tasks = [task]
            self.recipes = [[(False, slot[k]) for k in made.external]]
            self.kinds = [[(Arg.INPUT, k) for k in made.external]]
            self.labels = [lowering.run_label(computed)]
            self.unpack = [(0, e) for e in range(len(outputs))]
        else:
            self.tasks, self.recipes = [], []
            for g, members in enumerate(made.members):
                nodes = [computed[p] for p in members]
                task = FusedTask(nodes, lowering._with_literals(made.sources[g],
                                                                made.literal[g], nodes),
                                 made.returned[g], made.release[g])
                self.tasks.append(task)
                self.recipes.append([(kind != Arg.INPUT, v if kind != Arg.INPUT else slot[v])
                                     for kind, v in made.external[g]])
            self.kinds = made.external
            self.labels = made.labels
            self.unpack = list(made.outputs)
        self.outputs = outputs
        #: On a cluster, the groups as the workers hold them between steps, or None.
        self.kept: HeldProgram | None = None
        #: Whether they go as one task: on a cluster of one worker process, every group runs
        #: there anyway, and one task runs them on its threads (no scheduler round trip
        #: between groups).
        self.whole = False
        #: The cluster's copies of ``kept`` (Futures of the data each was scattered as), by
        #: the address of the worker holding it ("" for the whole program's).
        self.held: dict[str, Any] = {}
        # Symbols bound into the tasks: (task, member, input position, symbol) and
        # (node, attribute name, symbol); the first run has their values.
        self.literals = []
        for task in self.tasks:
            for j, sources in enumerate(task.sources):
                if any(kind == LIT and type(v) is Symbol for kind, v in sources):
                    task.sources[j] = sources = list(sources)
                    for position, (kind, v) in enumerate(sources):
                        if kind == LIT and type(v) is Symbol:
                            self.literals.append((task, j, position, v))
                            sources[position] = (LIT, v.value)
        self.attributes = [(node, name, v) for node in self.computed if id(node) in capture.symbolic
                           for name, v in node.attrs.items() if type(v) is Symbol]
        if self.remote:
            self.kept = self._held_program(granularity.workers)
            # (Groups pick parts of each other's tuples, selections, only across workers.)
            self.whole = len(self.tasks) > 1 and len(threads_by_worker(client)) == 1 \
                and not made.selections
            short = re.sub(r"\W", "_", self.name.split(".")[-1])  # train_step, Net_step
            self.whole_label = short if "step" in short else f"{short}_step"
        self.last_symbols: list | None = None
        if self.tasks and not isinstance(made, SinglePlan):
            self._threads_graph(made)
        #: The tasks as straight-line code, generated at the first replay (the capturing
        #: call runs the tasks as they are), and the whole run as one function.
        self.straight: list | None = None
        self.in_order: Callable | None = None

    def _held_program(self, threads: int) -> HeldProgram:
        """The groups as one :class:`HeldProgram`, its symbols placed by position."""
        group_of = {id(task): g for g, task in enumerate(self.tasks)}
        member_of = {id(node): (g, j) for g, task in enumerate(self.tasks)
                     for j, node in enumerate(task.nodes)}
        literals = [(group_of[id(task)], j, position, symbol.index)
                    for task, j, position, symbol in self.literals]
        attributes = [(*member_of[id(node)], name, symbol.index)
                      for node, name, symbol in self.attributes if id(node) in member_of]
        return HeldProgram(self.tasks, self.recipes, self.unpack, threads, literals,
                           attributes)

    def _replaced(self, writes: Writes, order: list[Node]) -> list[tuple[Node, Any, Node]]:
        """Per parameter or optimizer state the call writes: the node of its new value, what
        holds it (the tensor, or the optimizer's ``(state, param, name)``), and the leaf of
        its old value if the call read it."""
        read: dict[Any, Node] = {}
        for slot, k in zip(self.slots, self.leaf_positions):
            if slot[0] == TENSOR:
                read[id(slot[1])] = order[k]
            elif slot[0] == STATE:
                read[(id(slot[1]), id(slot[2]), slot[3])] = order[k]
        found = [(node, tensor, read[id(tensor)]) for tensor, node in writes.tensors
                 if id(tensor) in read]
        found += [(node, (optimizer.state, p, name), read[(id(optimizer), id(p), name)])
                  for optimizer, p, name, node in writes.states
                  if (id(optimizer), id(p), name) in read]
        return found

    def forget_inputs(self, order: list[Node]) -> None:
        """Once the capturing call landed: the program keeps its nodes' ops, attributes and
        sites, not the values they read (their leaf inputs become value-less stand-ins, one
        per leaf, so that a trace still sees which nodes read the same parameter)."""
        stand_ins: dict[int, Node] = {}

        def stand_in(leaf: Node) -> Node:
            if id(leaf) not in stand_ins:
                stand_ins[id(leaf)] = placeholder(leaf)
            return stand_ins[id(leaf)]

        for node in order:
            if node.value is not None:
                continue
            node.inputs = tuple(stand_in(i) if type(i) is Node and i.value is not None else i
                                for i in node.inputs)

    def _generate(self) -> None:
        """The straight-line code of each group, and of the whole run group after group."""
        self._generate_groups()
        self.in_order = None
        if len(self.tasks) > 1:
            lines = ["def run(values):"]
            for g, free, drops in self.sequence:
                args = "".join(f"r{v}, " if is_group else f"values[{v}], "
                               for is_group, v in self.recipes[g])
                call = f"s{g}(({args}))"
                lines.append(f"    r{g} = list({call})" if g in self.listed
                             else f"    r{g} = {call}")
                lines += [f"    r{h}[{e}] = None" for h, e in drops]  # read by no later group
                lines += [f"    r{h} = None" for h in free]
            lines.append("    return [" + ", ".join(f"r{g}[{e}]" for g, e in self.unpack) + "]")
            names = {f"s{g}": run for g, run in enumerate(self.straight)}
            exec("\n".join(lines), names)  # noqa: S102 (code built from positions only)
            self.in_order = names["run"]

    def _generate_groups(self) -> None:
        bound: dict[int, set] = {}
        for task, j, position, _ in self.literals:
            bound.setdefault(id(task), set()).add((j, position))
        symbolic = {id(node) for node, _, _ in self.attributes}
        self.straight = [straight_line(task, frozenset(bound.get(id(task), ())),
                                       frozenset(j for j, node in enumerate(task.nodes)
                                                 if id(node) in symbolic))
                         for task in self.tasks]

    def _threads_graph(self, made: GroupPlan) -> None:
        self.graph = {g: GroupTask(self, g) for g in range(len(self.tasks))}
        wanted = sorted({g for g, _ in made.outputs})
        self.wanted = wanted
        position = {g: k for k, g in enumerate(wanted)}
        self.picks = [(position[g], e) for g, e in made.outputs]
        by_reader, by_step, self.listed = made.early()
        #: (group, groups to free after it, (group, element) pairs to drop after it).
        self.sequence = list(zip(made.order, made.free_after, by_step))
        self.parts = {r: pairs for r, pairs in enumerate(by_reader) if pairs}

    # calling -----------------------------------------------------------------------------

    def bind(self, flat: list, spec: Any) -> list | None:
        """The values of this call's slots, its arguments ``flat`` nested as ``spec``, or
        None if a guard fails (``failed`` says which)."""
        symbols = self.guards.check(flat, spec)
        if symbols is FAILED:
            self.failed = self.guards.failed
            return None
        get = modes.choose_scheduler()
        client = modes.client_of(get)
        if (client is not None) != self.remote:
            self.failed = "the scheduler (a cluster or local threads)"
            return None
        if modes.granularity(get, client) != self.granularity:
            self.failed = "the number of threads or workers (the partition is made for them)"
            return None
        for record in self.optimizers:
            if record.optimizer._state_version != record.version:
                self.failed = f"{type(record.optimizer).__name__}'s state"
                return None
            if settings_of(record.optimizer) != record.settings:
                self.failed = f"{type(record.optimizer).__name__}'s settings"
                return None
        for p, was_none in self.grad_guards:
            if (p.grad is None) != was_none:
                self.failed = "which parameters have a .grad"
                return None
        if shared_tensors:  # the call reads a copy of each shared tensor, taken now
            shared_tensors.snapshot()
        values: list = [symbols]
        pending = []
        for slot, requires_grad in zip(self.slots, self.slot_requires_grad):
            kind = slot[0]
            if kind == DRAW:
                values.append(None)  # drawn when the call runs, all in the capture's order
                continue
            if kind == CONSTANT:
                values.append(slot[1])
                continue
            node = slot_node(slot, flat)
            if type(node) is str:
                self.failed = node
                return None
            if node.shape != slot[-2] or node.dtype != slot[-1]:
                self.failed = f"the shape or dtype of {slot_name(slot)}"
                return None
            if node.requires_grad != requires_grad:
                self.failed = f"requires_grad of {slot_name(slot)}"
                return None
            if node.value is None:
                pending.append(node)
            values.append(node)
        if pending:
            execution.realize(pending)
        return values

    def replay(self, bound: list | None, flat: list, first: bool = False) -> Any:
        """Run the program on the bound slots (from :meth:`bind`) and land its results. The
        capturing call runs it too (``first``), on the values its leaves had."""
        with self.lock:
            get = modes.choose_scheduler()
            client = modes.client_of(get)
            if client is None and not allocator.decided:
                allocator.for_steps()  # a loop of steps: keep freed arrays for the next
            if first:
                symbols = [s.value for s in self.symbols.symbols]
                values, self.first_values = self.first_values, None
                self.last_symbols = symbols
            else:
                if self.straight is None:
                    self._generate()
                symbols = bound[0]
                drawn = [draw() for draw in self.draws]
                values = [v.value if type(v) is Node and (client is not None or type(
                    v.value) is np.ndarray) else fetch(v) if type(v) is Node else v
                    for v in bound[1:]]
                if client is not None:
                    programs.refer_to_copies(values, bound[1:], client)
                bound.clear()  # holds the nodes, which landing may give the new values
                for s, slot in enumerate(self.slots):
                    if slot[0] == DRAW:
                        values[s] = drawn[slot[1]]
                if symbols is not None:
                    self._bind_symbols(symbols)
            aside = {} if first else self._release_grads()
            with contextlib.ExitStack() as stack:
                for observer in list(execution.local.observers):
                    stack.enter_context(observer.run(
                        self.computed, get, self.outputs, compiled=True,
                        after=self.in_place.nodes if self.in_place is not None else ()))
                results = self._run(values, get, client)
                with interrupts.deferred():
                    if self.in_place is not None:
                        results = self.in_place.run(results, values, symbols, first)
                    returned = self._land(results, values, symbols, first, aside)
        return returned

    def _release_grads(self) -> dict[int, Tensor]:
        """Let the ``.grad`` the call replaces go before the run, as the eager call's
        ``zero_grad()`` does (kept, each stayed beside its successor while the step ran). A
        ``.grad`` only its parameter holds is kept aside without its value, by parameter, for
        the landing to give it the new one; if the run fails, ``.grad`` stays None."""
        aside: dict[int, Tensor] = {}
        alone, only_grad = reference_baseline()
        count = sys.getrefcount
        with interrupts.deferred():  # every one of them or none, as zero_grad() does
            for p in self.replaced_grads:
                if p._grad is None:
                    continue
                if not self.remote and count(p._grad) == only_grad and \
                        count(p._grad._node) == alone:
                    p._grad._node.value = None
                    aside[id(p)] = p._grad
                p._grad = None
        return aside

    def _bind_symbols(self, current: list) -> None:
        """Write this call's numbers into the tasks' literals and the nodes' attributes."""
        if current == self.last_symbols:
            return
        for task, j, position, symbol in self.literals:
            task.sources[j][position] = (LIT, current[symbol.index])
        for node, name, symbol in self.attributes:
            node.attrs = {**node.attrs, name: current[symbol.index]}
        self.last_symbols = current

    def _run(self, values: list, get: Any, client: Any) -> list:
        if not self.outputs:
            return []
        try:
            with np.errstate(all="ignore"):
                if client is not None:
                    return programs.run_program(self, values, client, run_held, run_held_group)
                if len(self.tasks) == 1:
                    external = tuple([values[v] for _, v in self.recipes[0]])
                    with modes.blas_limited(get, self.plan.blas):
                        if node_by_node() or self.straight is None:
                            return list(self.tasks[0].run(external))
                        return list(self.straight[0](external))
                self.values = values
                try:
                    return self._run_groups(get)
                finally:
                    self.values = None
        except Exception as error:
            raise error.with_traceback(None) from None

    def _run_groups(self, get: Any) -> list:
        plan = self.plan
        threaded = modes.is_threaded(get)
        mode, choice = modes.choose_mode(plan) if threaded else ("in order", None)

        def run() -> list:
            with modes.blas_limited(get, self.plan.blas):
                if mode == "threads":
                    wanted = run_on_threads(self.graph, self.wanted, modes.worker_threads(),
                                            self.parts)
                    return [wanted[k][e] for k, e in self.picks]
                if self.in_order is not None and not node_by_node():
                    return self.in_order(self.values)
                done: dict = {}
                for g, free, drops in self.sequence:
                    value = self.graph[g](done)
                    done[g] = list(value) if g in self.listed else value
                    for h, e in drops:
                        done[h][e] = None
                    for h in free:
                        del done[h]
                return [done[g][e] for g, e in self.unpack]

        return modes.timed(choice, mode, run)

    def _prepare_landing(self, writes: Writes, outputs: list[Node], leaves: list[Node]) -> None:
        """Per write, where its value comes from (result ``k`` of ``outputs``, or slot
        ``-1 - s`` of ``leaves``) and the fields of the leaf that holds it, found once: a
        replay lands a value per parameter, gradient and optimizer state."""
        output_of = {id(node): k for k, node in enumerate(outputs)}
        slot_of_leaf = {id(node): s for s, node in enumerate(leaves)}

        def source(node: Node) -> tuple:
            k = output_of.get(id(node))
            return (k if k is not None else -1 - slot_of_leaf[id(node)], node.shape,
                    node.dtype, node.scope, node.site)

        self.land_tensors = [(tensor, source(node)) for tensor, node in writes.tensors]
        self.land_grads = [(p, source(node) if node is not None else None, same)
                           for p, node, same in writes.grads]
        self.land_states = [(optimizer.state, p, name, source(node))
                            for optimizer, p, name, node in writes.states]
        self.land_buffers = [(module, name, source(node) if node is not None else None)
                             for module, name, node in writes.buffers]
        self.land_results = {k: source(node) for k, node in writes.results}
        self.land_attributes = [(module, name, source(node))
                                for module, name, node in writes.attributes]
        #: The ``.grad`` the call replaced without reading them (its ``zero_grad()``): a
        #: replay lets them go before it runs, as the eager call does, or each would be kept
        #: beside its successor while the step runs.
        read = {id(slot[1]) for slot in self.slots if slot[0] == GRAD}
        self.replaced_grads = [p for p, _, same in self.land_grads
                               if not same and id(p) not in read]

    def _land(self, results: list, values: list, symbols: list | None, first: bool,
              aside: dict[int, Tensor]) -> Any:
        """Point the written tensors, ``.grad`` and optimizer state at new leaves holding the
        results; returns the call's result. (The capturing call's optimizer steps counted
        themselves.) ``aside``: ``.grad`` tensors :meth:`_release_grads` kept, which take
        their new values."""
        replayed, leaf_op = Node.replayed, ops.leaf
        # Source k of a write: result k, or (k < 0) slot -1 - k, as both[k] reads it.
        both = [*results, *values[::-1]]

        def leaf(source: tuple, requires_grad: bool = False) -> Node:
            k, shape, dtype, scope, site = source
            made = replayed(leaf_op, (), {}, shape, dtype, FORWARD, "leaf", scope, site,
                            both[k])
            made.requires_grad = requires_grad
            return made

        # Locally, a leaf that only its tensor refers to takes the new value itself, and a
        # .grad tensor that only its parameter refers to is kept: nobody could tell.
        local = not self.remote
        alone, only_grad = reference_baseline()
        count = sys.getrefcount
        renewing, renewed = [], []  # such leaves, and the sources of their new values
        replaced = []  # on a cluster, the old state is held until its successor is copied
        for tensor, source in self.land_tensors:
            if local and count(tensor._node) == alone:
                renewing.append(tensor._node)
                renewed.append(both[source[0]])
                continue
            old = tensor._node
            replaced.append(old.value)
            land(tensor, leaf(source, old.requires_grad and not old.history))
        for p, source, same in self.land_grads:
            if source is None:
                p.grad = None
            elif aside and id(p) in aside:
                p._grad = aside[id(p)]
                renewing.append(p._grad._node)
                renewed.append(both[source[0]])
            elif local and p._grad is not None and count(p._grad) == only_grad:
                if count(p._grad._node) == alone:
                    renewing.append(p._grad._node)
                    renewed.append(both[source[0]])
                else:
                    land(p._grad, leaf(source))
            elif same and p._grad is not None:
                land(p._grad, leaf(source))
            else:
                p.grad = Tensor(leaf(source))
        for state, p, name, source in self.land_states:
            tensor = state[p][name]
            if local and count(tensor._node) == alone:
                renewing.append(tensor._node)
                renewed.append(both[source[0]])
                continue
            replaced.append(tensor._node.value)
            land(tensor, leaf(source))
        renew_all(renewing, renewed)
        if self.remote:
            keep_until_copied(replaced)
        for module, name, source in self.land_buffers:
            if source is None:
                module._buffers[name] = None
            else:
                land(module._buffers[name], leaf(source))
        for module, name, source in self.land_attributes:
            object.__setattr__(module, name, Tensor(leaf(source)))
        if shared_tensors:  # a shared tensor's new values go to its mapping
            shared_tensors.write_back()
        if not first:
            for record in self.optimizers:
                optimizer = record.optimizer
                for p, name, symbol in record.scalars:
                    optimizer.state[p][name] = symbols[symbol.index]
                optimizer._step_count += record.stepped
        result = []
        for k, value in enumerate(self.result):
            source = self.land_results.get(k)
            if source is not None:
                result.append(Tensor(leaf(source)))
            elif type(value) is Symbol:
                result.append(symbols[value.index])
            else:
                result.append(value)
        if not first:
            for record in self.optimizers:
                record.optimizer._after_step()
        return unflatten(self.result_spec, iter(result))


class GroupTask:
    """A group task of a program, as :func:`threads.run_on_threads` runs it: its arguments
    are other groups' results and the program's bound slots."""

    __slots__ = ("program", "group", "dependencies")

    def __init__(self, program: Program, group: int) -> None:
        self.program, self.group = program, group
        self.dependencies = [v for is_group, v in program.recipes[group] if is_group]

    def __call__(self, done: dict) -> Any:
        program = self.program
        values = program.values
        external = tuple([done[v] if is_group else values[v]
                          for is_group, v in program.recipes[self.group]])
        if node_by_node() or program.straight is None:  # a trace listens, or
            return program.tasks[self.group].run(external)  # the capturing call runs
        return program.straight[self.group](external)
