"""Backward graph generation: turn a forward node graph into more nodes that compute gradients.

Walk the forward nodes that have autograd history in reverse topological order. Each node's
gradient is the sum of the contributions of its consumers; where there is more than one, an
explicit ``add_n`` node is created in the ``accumulate`` phase: the fan-in point. The vjp of the
node's op then turns that gradient into contributions for each input that needs one. Nothing is
computed here; the result is a mapping from nodes to (unrealized) gradient nodes, which the
execution layer runs together with whatever part of the forward graph is not realized yet.

A training loop records the same forward structure every step, so the backward graph is
generated once per structure (calling every vjp, with its shape and dtype rules) and then
instantiated from a :class:`BackwardTemplate`: the same ops, attributes, shapes and dtypes, new
nodes wired to this step's forward nodes. That is ~4x cheaper than calling the vjps, and is
the largest piece of the serial Python a step costs.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

from pargraph.autograd.recompute import Twins, recomputed
from pargraph.capturing import recording
from pargraph.graph import (
    ACCUMULATE,
    BACKWARD,
    FREED,
    Node,
    StructureCache,
    format_site,
    grad_mode,
    naming,
    recorded_at,
    toposort,
    uid_mark,
    user_site,
)
from pargraph.ops import add_n, cast

FREED_MESSAGE = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved tensors after "
    "calling backward."
)


def history_region(roots: Sequence[Node]) -> list[Node]:
    """The nodes with autograd history reachable from ``roots``, plus the leaves they reach,
    inputs before consumers."""
    return toposort(roots, stop=lambda node: not node.history)


def accumulate(contributions: list[Node], scope: str | None = None) -> Node:
    """One gradient out of several: the fan-in node (or the single contribution itself)."""
    if len(contributions) == 1:
        return contributions[0]
    with naming(ACCUMULATE, scope=scope):
        return add_n(*contributions)


def gradients(
    roots: Sequence[Node],
    grad_roots: Sequence[Node],
    wrt: set[int] | None = None,
    create_graph: bool = False,
    checked: bool = True,
) -> tuple[list[tuple[Node, Node]], list[Node]]:
    """Build the gradient nodes of ``roots`` (seeded with ``grad_roots``) with respect to the
    nodes whose ids are in ``wrt``; by default, as ``backward()`` does, the leaves that
    require grad and the nodes that retain their grad.

    Returns ``(grads, region)``: ``(node, gradient node)`` for each node of ``wrt`` reached,
    and the history nodes the backward pass went through (those whose saved values it uses).
    ``checked=False`` builds the nodes for a picture only, never to run: a freed graph or a
    value changed in place since does not matter then.
    """
    order = history_region(roots)
    if wrt is None:
        wrt = {id(n) for n in order if n.retains_grad or (n.requires_grad and not n.history)}
    key = None
    recorder = recording.recorder  # a compiled step's numbers must reach the vjps as symbols
    if checked and not create_graph and (recorder is None or recorder.keeps_templates(order)):
        key = _structure_key(order, roots, grad_roots, wrt)
    template = BackwardTemplate.cache.get(key) if key is not None else None
    called: dict[int, list] = {}  # vjps of live nodes called already: id -> contributions
    if template is not None:  # the region is a function of the structure too
        region = [order[k] for k in template.region]
        if any(node.freed for node in region):
            raise RuntimeError(FREED_MESSAGE)
        try:
            return template.instantiate(order, grad_roots), region
        except _Diverged as diverged:  # generated anew, each user backward called once
            called = diverged.called
    needs: dict[int, bool] = {}
    for node in order:
        needs[id(node)] = id(node) in wrt or (
            node.history and any(needs.get(id(i), False) for i in node.input_nodes())
        )
    in_region = [k for k, node in enumerate(order) if node.history and needs[id(node)]]
    region = [order[k] for k in in_region]
    if checked and any(node.state == FREED for node in region):
        raise RuntimeError(FREED_MESSAGE)
    mark = uid_mark()
    origins: list[tuple[int, int]] = []  # (first uid, forward position): who made which nodes
    position_of = {id(node): k for k, node in enumerate(order)}
    pending: dict[int, list[Node]] = {}
    for root, grad_root in zip(roots, grad_roots):
        pending.setdefault(id(root), []).append(grad_root)
    grads: list[tuple[Node, Node]] = []
    #: The live nodes' vjp calls: (forward position, gradient, contributions, first uid).
    live: list[tuple[int, Node, list, int]] = []
    twins = Twins() if recomputed else None
    saved_mode = grad_mode.enabled
    try:  # switched inside the try: an interrupt right after it still restores the mode
        grad_mode.enabled = create_graph
        for node in reversed(order):
            contributions = pending.pop(id(node), None)
            if contributions is None or not needs[id(node)]:
                continue
            origins.append((uid_mark(), position_of[id(node)]))
            g = accumulate(contributions, node.scope)
            if node.hooks:
                g = _hooked(node, g)
            if id(node) in wrt:
                grads.append((node, g))
            if not node.history:
                continue
            is_live = node.op.live_vjp and _context_of(node) is None
            start = uid_mark() if is_live else 0  # where its call's nodes begin
            made = called.get(id(node))
            if made is None:
                made = _propagate(node, g, needs, checked, twins)
            for position, contribution in made:
                if contribution is not None:
                    pending.setdefault(id(node.inputs[position]), []).append(contribution)
            if is_live:
                live.append((position_of[id(node)], g, made, start))
    finally:
        grad_mode.enabled = saved_mode
    if key is not None:
        template = BackwardTemplate.record(order, grad_roots, grads, mark, origins, live)
        if template is not None:
            template.region = in_region
            BackwardTemplate.cache.put(key, template)
    return grads, region


def _structure_key(order: list[Node], roots: Sequence[Node], grad_roots: Sequence[Node],
                   wrt: set[int]) -> tuple | None:
    """What the generated backward graph depends on: each node's op, attributes, shape, dtype
    and autograd flags, and, for nodes with history, their inputs (positions, or the scalars
    themselves); for values changed in place, which of their consumers may not use them
    (what PyTorch's check decides: a template is recorded only where it passed). ``None``
    when it cannot be a cache key (an unhashable attribute, user code that must run)."""
    position = {node: k for k, node in enumerate(order)}  # nodes hash by identity
    parts: list[Any] = []
    changed = []
    checkpointed = bool(recomputed)
    for node in order:
        if node.hooks or not (node.op.replayable or node.op.live_vjp) or (
                checkpointed and node in recomputed):
            return None  # user code that must run; a checkpointed function's nodes
        if node.overwritten:
            changed.append(node)
        flags = (node.requires_grad, node.retains_grad, id(node) in wrt)
        if node.history:
            inputs = tuple([position[i] if type(i) is Node else (type(i), i)
                            for i in node.inputs])
        else:  # a vjp may look at a leaf-side node's producer (swap_last), never further
            inputs = bool(node.inputs)
        # A cut node's attributes (an updated parameter's learning rate) cannot matter.
        attrs = tuple([(name, _hashable(v)) for name, v in node.attrs.items()]) \
            if node.attrs and node.inputs else ()
        if node.op.live_vjp and node.history:
            attrs = (attrs, _context_of(node))  # None: a live call, in the key too
        parts.append((node.op, node.shape, node.dtype, flags, inputs, attrs))
    if changed:
        parts.append(_changed_uses(order, changed, position))
    seeds = tuple((position[r], g.shape, g.dtype) for r, g in zip(roots, grad_roots))
    key = (seeds, tuple(parts))
    try:
        hash(key)
    except TypeError:  # an index array or a slice among the attributes
        return None
    return key


def _context_of(node: Node) -> Any:
    """What the vjp of a live node reads besides the structure (its ctx's values), for the
    key; None when its vjp must be called at every backward."""
    describe = node.op.vjp_context
    return None if describe is None or node.context is None else describe(node)


def _changed_uses(order: list[Node], changed: list[Node], position: dict) -> tuple:
    """Per value changed in place, the positions of the nodes whose use of it the in-place
    check looks at (itself, and consumers made before the op that changed it)."""
    suspect: dict[Node, list[int]] = {node: [] for node in changed}
    for k, node in enumerate(order):
        for i in node.inputs:
            if type(i) is Node and i.overwritten and node.uid < i.overwritten and i in suspect:
                suspect[i].append(k)
    return tuple((position[node], node.uid < node.overwritten, tuple(uses))
                 for node, uses in suspect.items())


#: Marks a slice in a structure key: slices are unhashable before Python 3.12, and an index
#: with one (a DataParallel shard of the batch) made every step a cache miss.
_SLICE = object()


def _hashable(value: Any) -> Any:
    if type(value) is slice:
        return (_SLICE, value.start, value.stop, value.step)
    if type(value) is tuple and any(type(v) is slice for v in value):
        return tuple([_hashable(v) for v in value])
    return value


class _Literal:
    """A scalar input of a template node (plain ints are positions)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class _InputOf:
    """A template node input that is input ``j`` of forward node ``k`` (``swap_last`` returns
    the node a permute was recorded on, which the history region need not contain)."""

    __slots__ = ("k", "j")

    def __init__(self, k: int, j: int) -> None:
        self.k, self.j = k, j


class _LiveCall:
    """A template's call of a live node's vjp (a custom op's backward, user code that runs at
    every backward): forward node ``k``, its gradient (a template reference), the input
    positions asked for, and those that gave a contribution when the template was recorded
    (the template's next references)."""

    __slots__ = ("k", "g", "wanted", "present")

    def __init__(self, k: int, g: Any, made: list[tuple[int, Node | None]]) -> None:
        self.k, self.g = k, g
        self.wanted = tuple(position for position, _ in made)
        self.present = tuple(position for position, c in made if c is not None)

    def call(self, order: list[Node], g: Node, called: dict[int, list]) -> list[Node]:
        node = order[self.k]
        needs = {id(node.inputs[position]): True for position in self.wanted}
        saved = grad_mode.enabled
        try:
            grad_mode.enabled = False
            made = _propagate(node, g, needs)
        finally:
            grad_mode.enabled = saved
        called[id(node)] = made
        if tuple(position for position, c in made if c is not None) != self.present:
            raise _Diverged(called)
        return [c for _, c in made if c is not None]


class _Diverged(Exception):
    """A live vjp gave contributions to other inputs than when the template was recorded:
    the backward is generated anew, with the vjps called so far (``called``) not called
    again."""

    def __init__(self, called: dict[int, list]) -> None:
        super().__init__()
        self.called = called


class BackwardTemplate:
    """The nodes one backward generation created, in positions: inputs refer to the forward
    history region (``order``), then the seeds, then earlier template nodes. A live node's
    vjp (:class:`_LiveCall`) is called again, its contributions taking the next positions.
    Bounded cache, least recently used first out; hits and misses show in
    ``trace().summary()``."""

    cache = StructureCache(32)

    def __init__(self, nodes: list, grads: list[tuple[int, int]]) -> None:
        self.nodes = nodes
        self.grads = grads
        self.region: list[int] = []  # positions of the history nodes the pass goes through

    @classmethod
    def record(cls, order: list[Node], grad_roots: Sequence[Node],
               grads: list[tuple[Node, Node]], mark: int, origins: list[tuple[int, int]],
               live: list[tuple[int, Node, list, int]]) -> BackwardTemplate | None:
        refs: dict[int, Any] = {id(node): k for k, node in enumerate(order)}
        for k, node in enumerate(grad_roots):
            refs.setdefault(id(node), len(order) + k)
        input_of = {id(i): (k, j) for k, node in enumerate(order)
                    for j, i in enumerate(node.inputs) if isinstance(i, Node)}
        # What a live vjp made is made anew by its call: the template holds the call, placed
        # after its gradient and before the contributions' consumers (by creation order).
        made_by: dict[int, int] = {}
        calls = []
        for k, g, made, start in live:
            uids = [start]
            for _, contribution in made:
                if contribution is not None:
                    if contribution.uid < start or id(contribution) in made_by:
                        return None  # a node from before the call: a backward returning g
                    made_by[id(contribution)] = len(calls)
                    uids.append(contribution.uid)
            calls.append((max(uids), k, g, made))
        created = toposort([g for _, g in grads] + [g for _, g, _, _ in live],
                           stop=lambda n: id(n) in refs or id(n) in made_by or n.uid < mark)
        items: list[tuple[int, Any]] = []
        for node in created:
            if id(node) in refs or id(node) in made_by:
                continue
            if node.uid < mark:  # neither forward, nor seed, nor new
                if id(node) not in input_of:
                    return None
                refs[id(node)] = _InputOf(*input_of[id(node)])
                continue
            items.append((node.uid, node))
        items += [(uid, call) for uid, *call in calls]
        items.sort(key=lambda item: item[0])
        starts = [uid for uid, _ in origins]
        nodes: list[Any] = []
        made_count = len(order) + len(grad_roots)
        for _, node in items:
            if type(node) is not Node:  # a live call: (k, g, made)
                k, g, made = node
                nodes.append(_LiveCall(k, refs[id(g)], made))
                for _, contribution in made:
                    if contribution is not None:
                        refs[id(contribution)] = made_count
                        made_count += 1
                continue
            spec = tuple(refs[id(i)] if isinstance(i, Node) else _Literal(i)
                         for i in node.inputs)
            origin = origins[bisect.bisect_right(starts, node.uid) - 1][1]
            nodes.append((node.op, spec, node.attrs, node.shape, node.dtype, node.phase,
                          node.key_prefix(), origin, node.site is order[origin].site,
                          None if node.inputs else node.value))
            refs[id(node)] = made_count
            made_count += 1
        pairs = [(refs[id(t)], refs[id(g)]) for t, g in grads]
        if not all(isinstance(g, int) for _, g in pairs):
            return None
        return cls(nodes, pairs)

    def instantiate(self, order: list[Node], grad_roots: Sequence[Node]) -> list[tuple[Node, Node]]:
        """This step's backward graph: the template's nodes wired to ``order``. Raises
        :class:`_Diverged` when a live vjp's contributions differ from the recorded ones."""
        nodes: list[Any] = [*order, *grad_roots]

        def resolve(s: Any) -> Any:
            return nodes[s] if s.__class__ is int \
                else s.value if s.__class__ is _Literal else order[s.k].inputs[s.j]

        call_site = None
        called: dict[int, list] = {}
        for entry in self.nodes:
            if entry.__class__ is _LiveCall:
                nodes += entry.call(order, resolve(entry.g), called)
                continue
            op, spec, attrs, shape, dtype, phase, prefix, origin, at_forward_site, value \
                = entry
            inputs = tuple([
                nodes[s] if s.__class__ is int
                else s.value if s.__class__ is _Literal else order[s.k].inputs[s.j]
                for s in spec])
            forward = order[origin]
            if at_forward_site:
                site = forward.site
            else:
                site = call_site = call_site or user_site()
            nodes.append(Node.replayed(op, inputs, attrs, shape, dtype, phase, prefix,
                                       forward.scope, site, value))
        return [(nodes[t], nodes[g]) for t, g in self.grads]


def _hooked(node: Node, g: Node) -> Node:
    """``g`` after the hooks registered on ``node``'s tensor: each sees the gradient as a
    tensor (lazy: what it computes joins the backward graph) and may return a replacement."""
    owner = node.owner_tensor()
    if owner is None:
        return g
    for hook in list(node.hooks):
        replaced = hook(owner._wrap(g))
        if replaced is not None:
            if tuple(replaced.shape) != g.shape:
                raise RuntimeError(f"hook {getattr(hook, '__name__', hook)!r} has changed the "
                                   f"size of value: expected {list(g.shape)}, got "
                                   f"{list(replaced.shape)}")
            g = replaced._node
    return g


def _propagate(node: Node, g: Node, needs: dict[int, bool], checked: bool = True,
               twins: Twins | None = None) -> list[tuple[int, Node | None]]:
    """Apply the vjps of ``node``'s op: ``(position, contribution or None)`` per input that
    needs a gradient. ``twins``: this backward's recomputed nodes (the vjps of a checkpointed
    node read its twins, see :mod:`pargraph.autograd.recompute`).

    The nodes they emit carry ``node``'s source line: an error in them points at the user's
    line that recorded the forward op."""
    with recorded_at(node.site):
        return _emit_vjps(node, g, needs, checked, twins)


def _check_not_overwritten(node: Node, g: Node, contribution: Node, suspects: set[int]) -> None:
    """PyTorch's version-counter check: a vjp that needs a value an in-place op has since
    replaced (``suspects``: the forward node or inputs of it that were) raises instead of
    using the old value."""
    boundary = {id(n) for n in (node, g, *node.input_nodes())}
    used = toposort([contribution], stop=lambda n: id(n) in boundary)
    for saved in used:
        if id(saved) in suspects:
            what = "its output" if saved is node else "one of its inputs"
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by an "
                f"inplace operation: [{saved.dtype} {list(saved.shape)}], {what}, was changed "
                f"in place after {node.op.name} (recorded at {format_site(node.site)}) used it. "
                "Hint: compute the gradient before changing it in place, or change a clone().")


def _emit_vjps(node: Node, g: Node, needs: dict[int, bool], checked: bool,
               twins: Twins | None = None) -> list[tuple[int, Node | None]]:
    # Found once per node, not once per contribution: a node of n inputs (a stack) would look
    # through all n inputs n times.
    suspects = None
    if checked:
        uid = node.uid
        suspects = {id(n) for n in (node, *node.inputs)
                    if type(n) is Node and n.overwritten and uid < n.overwritten}
    with naming(BACKWARD, node.op.name, node.scope):
        wanted = [k for k, x in enumerate(node.inputs)
                  if type(x) is Node and needs.get(id(x), False)]
        out, inputs = node, node.inputs
        if twins is not None and node in recomputed:  # its values are computed again
            out, inputs = twins.of(node, g), tuple(twins.of(i, g) for i in node.inputs)
        if node.op.vjp_of_many is not None and len(wanted) > 1:
            made = node.op.vjp_of_many(g, out, wanted, *inputs, **node.attrs)
        else:
            made = []
            for position in wanted:
                vjp = node.op.vjp(position)
                made.append(None if vjp is None else vjp(g, out, *inputs, **node.attrs))
        found = []
        for position, contribution in zip(wanted, made):
            if contribution is not None:
                x = node.inputs[position]
                if suspects:
                    _check_not_overwritten(node, g, contribution, suspects)
                assert contribution.shape == x.shape, (node.op.name, contribution.shape,
                                                       x.shape)
                if contribution.dtype != x.dtype:
                    contribution = cast(contribution, dtype=x.dtype)
            found.append((position, contribution))
        if out is not node:
            twins.vjps_made((out, *inputs), [c for _, c in found if c is not None])
        return found
