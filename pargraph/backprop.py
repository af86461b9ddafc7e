"""Backward graph generation: turn a forward node graph into more nodes that compute gradients.

Walk the forward nodes that have autograd history in reverse topological order. Each node's
gradient is the sum of the contributions of its consumers; where there is more than one, an
explicit ``add_n`` node is created in the ``accumulate`` phase: the fan-in point. The vjp of the
node's op then turns that gradient into contributions for each input that needs one. Nothing is
computed here; the result is a mapping from nodes to (unrealized) gradient nodes, which the
execution layer runs together with whatever part of the forward graph is not realized yet.
"""

from __future__ import annotations

from collections.abc import Sequence

from pargraph.graph import ACCUMULATE, BACKWARD, FREED, Node, format_site, naming, toposort
from pargraph.ops import add_n, cast, grad_mode

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
    targets: set[int] | None = None,
    create_graph: bool = False,
    checked: bool = True,
) -> tuple[list[tuple[Node, Node]], list[Node]]:
    """Build the gradient nodes of ``roots`` (seeded with ``grad_roots``) with respect to the
    nodes whose ids are in ``targets``; by default, as ``backward()`` does, the leaves that
    require grad and the nodes that retain their grad.

    Returns ``(grads, region)``: ``(target, gradient node)`` for each target that was reached,
    and the history nodes the backward pass went through (those whose saved values it uses).
    ``checked=False`` builds the nodes for a picture only, never to run: a freed graph or a
    value changed in place since does not matter then.
    """
    order = history_region(roots)
    if targets is None:
        targets = {id(n) for n in order if n.retains_grad or (n.requires_grad and not n.history)}
    needs: dict[int, bool] = {}
    for node in order:
        needs[id(node)] = id(node) in targets or (
            node.history and any(needs.get(id(i), False) for i in node.input_nodes())
        )
    region = [node for node in order if node.history and needs[id(node)]]
    if checked and any(node.state == FREED for node in region):
        raise RuntimeError(FREED_MESSAGE)

    pending: dict[int, list[Node]] = {}
    for root, grad_root in zip(roots, grad_roots):
        pending.setdefault(id(root), []).append(grad_root)
    grads: list[tuple[Node, Node]] = []
    saved_mode = grad_mode.enabled
    grad_mode.enabled = create_graph
    try:
        for node in reversed(order):
            contributions = pending.pop(id(node), None)
            if contributions is None or not needs[id(node)]:
                continue
            g = accumulate(contributions, node.scope)
            if id(node) in targets:
                grads.append((node, g))
            if node.history:
                _propagate(node, g, needs, pending, checked)
    finally:
        grad_mode.enabled = saved_mode
    return grads, region


def _propagate(node: Node, g: Node, needs: dict[int, bool], pending: dict[int, list],
               checked: bool = True) -> None:
    """Apply the vjps of ``node``'s op: one gradient contribution per input that needs one.

    The nodes they emit carry ``node``'s source line: an error in them points at the user's
    line that recorded the forward op."""
    saved_site, grad_mode.site = grad_mode.site, node.site
    try:
        _emit_vjps(node, g, needs, pending, checked)
    finally:
        grad_mode.site = saved_site


def _check_not_overwritten(node: Node, g: Node, contribution: Node) -> None:
    """PyTorch's version-counter check: a vjp that needs a value an in-place op has since
    replaced (the forward node or one of its inputs) raises instead of using the old value."""
    suspects = {id(n) for n in (node, *node.input_nodes()) if n.overwritten}
    if not suspects:
        return
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


def _emit_vjps(node: Node, g: Node, needs: dict[int, bool], pending: dict[int, list],
               checked: bool) -> None:
    with naming(BACKWARD, node.op.name, node.scope):
        for position, x in enumerate(node.inputs):
            if not isinstance(x, Node) or not needs.get(id(x), False):
                continue
            vjp = node.op.vjp(position)
            if vjp is None:
                continue
            contribution = vjp(g, node, *node.inputs, **node.attrs)
            if checked:
                _check_not_overwritten(node, g, contribution)
            assert contribution.shape == x.shape, (node.op.name, contribution.shape, x.shape)
            if contribution.dtype != x.dtype:
                contribution = cast(contribution, dtype=x.dtype)
            pending.setdefault(id(x), []).append(contribution)
