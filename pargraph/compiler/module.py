"""``pargraph.compile(model)``: a module whose forward pass is captured once and replayed.

As ``model = torch.compile(model)`` in a PyTorch program: the result is a Module wrapping the
original (``_orig_mod``, so ``state_dict`` keys start with ``_orig_mod.`` as PyTorch's do),
and calling it runs the captured forward. The capture records the forward once, as a
template of nodes (:class:`ForwardTemplate`): a later call with the same guards makes the same
nodes on the new arguments and the current parameters, with no module calls, shape rules or
stack walks. The nodes have autograd history as recorded ones do, so ``loss.backward()``
runs through them; its graph comes from pargraph's backward templates, and the optimizer's
step stays eager. Compiling the whole step (``pargraph.compile(train_step)``) also removes
those: it is the faster form.
"""

from __future__ import annotations

import warnings
from typing import Any

from pargraph._tensor import Tensor
from pargraph.capturing import Symbol, recording
from pargraph.compiler.capture import Capture
from pargraph.compiler.guards import FAILED, Guards, concrete
from pargraph.compiler.step import CACHE_SIZE
from pargraph.compiler.writes import CONSTANT, DRAW, leaf_origins, leaf_slot, slot_node
from pargraph.engine import execution
from pargraph.graph import Node, toposort
from pargraph.nn.module import Module
from pargraph.pytree import flatten, unflatten


class OptimizedModule(Module):
    """What ``pargraph.compile(module)`` returns, under PyTorch's class name (see the
    module's docstring).

    Examples
    --------
    >>> import pargraph
    >>> model = pargraph.compile(pargraph.nn.Linear(3, 2))
    >>> model(pargraph.ones(4, 3)).shape
    pargraph.Size([4, 2])
    >>> list(model.state_dict())
    ['_orig_mod.weight', '_orig_mod.bias']
    """

    def __init__(self, module: Module, fullgraph: bool = False,
                 cache_size: int = CACHE_SIZE) -> None:
        super().__init__()
        self._orig_mod = module
        object.__setattr__(self, "fn", module)  # for messages; not a child module
        self.fullgraph, self.cache_size = fullgraph, cache_size
        self.templates: list[ForwardTemplate] = []
        self.eager: str | None = None
        self.captures = self.replays = 0

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._modules["_orig_mod"], name)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        if self.eager is not None or recording.recorder is not None:
            return self._orig_mod(*args, **kwargs)
        flat, spec = flatten((args, kwargs))
        failed = None
        for template in self.templates:
            made = template.replay(flat, spec)
            if made is not FAILED:
                self.replays += 1
                return made
            failed = failed or template.guards.failed
        if len(self.templates) >= self.cache_size:
            self.eager = f"guard {failed} failed on each of the last {self.cache_size} captures"
            warnings.warn(f"pargraph.compile: {type(self._orig_mod).__name__} captured "
                          f"{self.cache_size} forward passes (cache_size) and its {failed} "
                          "changes still: it runs eagerly from now on", stacklevel=3)
            return self._orig_mod(*args, **kwargs)
        self.captures += 1
        with ForwardCapture(self, flat) as capture:
            result = capture.call(self._orig_mod, spec)
            if capture.broken is not None:
                self.eager = f"graph break at {capture.broken}"
                return concrete(result)
            self.templates.insert(0, capture.template(result))
            return concrete(result)  # the recorded nodes: the first call ran as eager code


class ForwardCapture(Capture):
    """The recorder of a module's forward pass: no run, no optimizer, no ``.grad``."""

    def realize(self, targets: list[Node], replicate: Any) -> bool:
        if self.live:
            self.stop("its forward pass runs the graph")
        return False

    def buffer_set(self, module: Module, name: str) -> None:
        if self.live:
            self.stop(f"its forward pass assigns buffer {name!r}")

    def attribute_set(self, module: Module, name: str) -> None:
        if self.live:  # a template made again at each call would not set it again
            self.stop(f"its forward pass sets the tensor attribute {name!r}")

    def optimizer_step(self, optimizer: Any, pending: list) -> None:
        if self.live:
            self.stop("its forward pass steps an optimizer")
        super().optimizer_step(optimizer, pending)

    def template(self, result: Any) -> ForwardTemplate:
        self.live = False
        flat, spec = flatten(result)
        outputs = [v._node for v in flat if isinstance(v, Tensor)]
        rebound = [(tensor, old, tensor._node) for tensor, old in self.rebinds.values()]
        roots = outputs + [node for *_, node in rebound]
        made = toposort(roots, stop=lambda n: n.uid < self.mark or n.value is not None)
        template = ForwardTemplate(self, made, flat, spec, rebound)
        self._plain()
        return template


class ForwardTemplate:
    """A captured forward pass: its slots (arguments, parameters and buffers, random draws,
    constants) and its nodes in order, each as (op, inputs, attributes, the recorded node)."""

    def __init__(self, capture: ForwardCapture, made: list[Node], result: list, spec: Any,
                 rebound: list) -> None:
        self.guards = Guards(capture)
        self.symbols = capture.symbols
        self.result, self.spec = result, spec
        self.draws = [draw for _, draw in capture.draws.values()]
        #: What a replay makes each draw's leaf like.
        self.drawn_like = [_describe_node(node) for node, _ in capture.draws.values()]
        origins = leaf_origins(capture)
        self.slots: list[tuple] = []
        position: dict[int, tuple] = {}
        self.nodes = []
        for node in made:
            if node.uid < capture.mark or node.value is not None:
                slot = leaf_slot(node, capture, origins)
                position[id(node)] = (True, len(self.slots))
                self.slots.append((*slot, node.requires_grad))
                continue
            inputs = tuple(position[id(i)] if type(i) is Node else (None, i)
                           for i in node.inputs)
            symbolic = any(type(v) is Symbol for v in node.attrs.values())
            self.nodes.append((_describe_node(node), inputs, node.attrs, symbolic,
                               node.requires_grad, node.history, node.grad_name))
            position[id(node)] = (False, len(self.nodes) - 1)
        self.outputs = {k: position[id(v._node)] for k, v in enumerate(result)
                        if isinstance(v, Tensor)}
        self.rebound = [(capture.argument_nodes.get(id(old)), tensor, position[id(node)])
                        for tensor, old, node in rebound if id(node) in position]

    def replay(self, flat: list, spec: Any) -> Any:
        """The forward's nodes, made again for this call (its arguments ``flat`` nested as
        ``spec``); FAILED if a guard fails."""
        symbols = self.guards.check(flat, spec)
        if symbols is FAILED:
            return FAILED
        values = [draw() for draw in self.draws]
        leaves = []
        for slot in self.slots:
            kind = slot[0]
            if kind == DRAW:
                leaves.append(_leaf_like(self.drawn_like[slot[1]], values[slot[1]]))
                continue
            if kind == CONSTANT:
                leaves.append(slot[1])
                continue
            node = slot_node(slot, flat)
            if type(node) is str or node.requires_grad != slot[-1]:
                self.guards.failed = node if type(node) is str else \
                    "requires_grad of a tensor the forward reads"
                return FAILED
            leaves.append(node)
        made: list[Node] = []
        replayed = Node.replayed
        for (op, shape, dtype, phase, prefix, scope, site), inputs, attrs, symbolic, \
                requires_grad, history, grad_name in self.nodes:
            values = tuple([(leaves if is_slot else made)[v] if is_slot is not None
                            else symbols[v.index] if type(v) is Symbol else v
                            for is_slot, v in inputs])
            if symbolic:
                attrs = {k: symbols[v.index] if type(v) is Symbol else v
                         for k, v in attrs.items()}
            new = replayed(op, values, attrs, shape, dtype, phase, prefix, scope, site)
            new.requires_grad, new.history, new.grad_name = requires_grad, history, grad_name
            made.append(new)
        for argument, tensor, (is_slot, v) in self.rebound:
            target = flat[argument] if argument is not None else tensor
            new = (leaves if is_slot else made)[v]
            replaced = target._node
            target._rebind(new)
            execution.defer([new], state=True, replaces=[replaced])
        result = []
        for k, value in enumerate(self.result):
            where = self.outputs.get(k)
            if where is not None:
                result.append(Tensor((leaves if where[0] else made)[where[1]]))
            elif type(value) is Symbol:
                result.append(symbols[value.index])
            else:
                result.append(value)
        return unflatten(self.spec, iter(result))


def _describe_node(node: Node) -> tuple:
    """What a replay needs to make ``node`` again (the node itself would keep its inputs)."""
    return (node.op, node.shape, node.dtype, node.phase, node.key_prefix(), node.scope,
            node.site)


def _leaf_like(described: tuple, value: Any) -> Node:
    op, shape, dtype, phase, prefix, scope, site = described
    return Node.replayed(op, (), {}, shape, dtype, phase, prefix, scope, site, value=value)
