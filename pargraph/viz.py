"""Pictures of the graph (graphviz) and progress bars for long realizations."""

from __future__ import annotations

import os
from collections import Counter, defaultdict

import numpy as np

from pargraph._tensor import Tensor
from pargraph.autograd.backward_graph import gradients, history_region
from pargraph.engine import execution
from pargraph.graph import CUT, Node, toposort
from pargraph.ops import constant, leaf

STYLES = {
    "forward": dict(shape="ellipse", style="filled", fillcolor="#d8eedf", color="#4C9F70"),
    "backward": dict(shape="ellipse", style="filled", fillcolor="#d6e4f3", color="#3B75AF"),
    "accumulate": dict(shape="diamond", style="filled", fillcolor="#f6d5da", color="#D1495B"),
    "update": dict(shape="ellipse", style="filled", fillcolor="#fbeed2", color="#EDAE49"),
    "parameter": dict(shape="box", style="filled,bold", fillcolor="#fff7c2", color="#8a7400"),
    "input": dict(shape="box", style="filled", fillcolor="#eeeeee", color="#777777"),
}


def _graph_nodes(t: Tensor, backward: bool) -> tuple[list[Node], list[tuple[Node, Node]]]:
    """The forward graph of ``t`` and, if asked, the backward graph that backward() would run,
    with ``(leaf, gradient)`` pairs.

    The backward nodes are built for the picture only: nothing runs and nothing is freed, so
    the picture can be drawn after ``backward()`` and ``optimizer.step()`` too.
    """
    pairs: list[tuple[Node, Node]] = []
    if backward and t.requires_grad:
        seed = constant(np.ones(t.shape, dtype=t.dtype))
        pairs, _ = gradients([t._node], [seed], checked=False)
    forward = history_region([t._node]) if t.requires_grad else toposort([t._node])
    seen = {id(n) for n in forward}
    extra = [n for n in toposort([g for _, g in pairs]) if id(n) not in seen]
    return forward + extra, pairs


def _kind(node: Node) -> str:
    # A cut node without history holds its value only: a parameter (also right after an
    # optimizer update) or an input.
    if node.op is leaf or (not node.history and node.state == CUT):
        return "parameter" if node.requires_grad else "input"
    return node.phase


def _depths(nodes: list[Node]) -> dict[int, int]:
    """Longest distance from a source: nodes of one depth can run at the same time."""
    depth: dict[int, int] = {}
    for node in nodes:  # inputs come first
        depth[id(node)] = 1 + max((depth.get(id(i), -1) for i in node.input_nodes()), default=-1)
    return depth


def visualize(t: Tensor, path: str | os.PathLike, backward: bool = True,
              collapse: str | None = None, params: dict | None = None):
    """Draw the graph of ``t`` with graphviz into ``path`` (``.svg``, ``.png`` or ``.pdf``), or
    write its DOT source (``.gv`` or ``.dot``: no Graphviz programs needed).

    Forward, backward and accumulation nodes are styled differently; parameters and inputs
    are boxes; nodes of the same depth share a rank (the levels that can run in parallel);
    edges carry shapes. ``collapse="module"`` draws one box per module (and per phase) for
    graphs too large to read. ``params`` maps names to parameters, e.g.
    ``dict(model.named_parameters())``, to label them.

    Examples
    --------
    >>> import os, tempfile, pargraph
    >>> w = pargraph.ones(3, requires_grad=True)
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     pargraph.visualize((w.exp() * w).sum(), os.path.join(folder, "graph.gv")).name
    'pargraph'
    """
    try:
        import graphviz
    except ImportError:
        raise ImportError(f"visualize needs the graphviz Python package: {_INSTALL}") from None

    nodes, grads = _graph_nodes(t, backward)
    # A parameter's node, or one it held before (``opt.step()`` since recording rebound it:
    # the graph still reads the value it had, whose node remembers the tensor that held it).
    by_tensor = {id(p): name for name, p in (params or {}).items()}
    names = {id(p._node): name for name, p in (params or {}).items()}
    for node in nodes:
        owner = node.owner_tensor()
        if id(node) not in names and owner is not None and id(owner) in by_tensor:
            names[id(node)] = by_tensor[id(owner)]
    fmt = os.path.splitext(os.fspath(path))[1].lstrip(".") or "svg"
    dot = graphviz.Digraph("pargraph", format=fmt, graph_attr=dict(rankdir="TB",
                                                                   fontname="Helvetica"),
                           node_attr=dict(fontname="Helvetica", fontsize="10"),
                           edge_attr=dict(fontname="Helvetica", fontsize="8", color="#666666"))
    if collapse == "module":
        _draw_collapsed(dot, nodes)
    elif collapse is not None:
        raise ValueError(f"visualize: collapse must be None or 'module', got {collapse!r}")
    else:
        _draw_nodes(dot, nodes, names)
        for leaf, g in grads:
            dot.edge(g.key, leaf.key, label="grad", style="dashed", color="#3B75AF",
                     constraint="false")
    base = os.path.splitext(os.fspath(path))[0]
    if fmt in ("gv", "dot"):  # the source itself: Graphviz's programs render it later
        dot.save(os.fspath(path))
        return dot
    try:
        dot.render(base, cleanup=True)
    except graphviz.ExecutableNotFound:
        raise RuntimeError(f"visualize needs Graphviz's `dot` program on the PATH: "
                           f"{_INSTALL}") from None
    return dot


_INSTALL = ("`pip install graphviz` (it comes with pargraph's [demos] and [test] extras) and "
            "the Graphviz programs (`apt-get install graphviz`, `brew install graphviz` or "
            "https://graphviz.org/download/)")


def _draw_nodes(dot, nodes: list[Node], names: dict[int, str]) -> None:
    depth = _depths(nodes)
    ranks: dict[int, list[str]] = defaultdict(list)
    for node in nodes:
        kind = _kind(node)
        label = names.get(id(node)) or (node.op.name if kind not in ("parameter", "input")
                                        else ("parameter" if kind == "parameter" else "input"))
        label += f"\n{node.shape}" if kind in ("parameter", "input") else ""
        dot.node(node.key, label, tooltip=node.key, **STYLES[kind])
        ranks[depth[id(node)]].append(node.key)
        for i in node.input_nodes():
            dot.edge(i.key, node.key, label=str(i.shape) if i.shape else "()")
    for keys in ranks.values():
        with dot.subgraph() as same:
            same.attr(rank="same")
            for key in keys:
                same.node(key)


def _draw_collapsed(dot, nodes: list[Node]) -> None:
    def group(node: Node) -> str:
        kind = _kind(node)
        if kind in ("parameter", "input"):
            return f"{node.scope or 'inputs'} {kind}s"
        return f"{node.scope or '(top level)'} {kind}"

    members: dict[str, Counter] = defaultdict(Counter)
    kinds: dict[str, str] = {}
    edges: Counter = Counter()
    for node in nodes:
        g = group(node)
        members[g][node.op.name] += 1
        kinds[g] = _kind(node)
        for i in node.input_nodes():
            if group(i) != g:
                edges[(group(i), g)] += 1
    for g, ops in members.items():
        detail = ", ".join(f"{op} x{n}" if n > 1 else op for op, n in ops.most_common(4))
        dot.node(g, f"{g}\n{sum(ops.values())} nodes: {detail}", **STYLES[kinds[g]])
    for (a, b), n in edges.items():
        dot.edge(a, b, label=f"{n} edges" if n > 1 else "")


def progress(minimum: float = 0.5):
    """Show a progress bar for realizations inside the block that take over ``minimum`` s:
    dask's bar on local schedulers, ``distributed.progress`` on a cluster.

    Realizations shorter than ``minimum`` (0.5 s by default) show nothing: a training step
    usually is one. For a bar over a whole training loop, wrap the loop in ``tqdm`` as the
    demos do. Work that ``backward()`` deferred inside the block runs before it closes.

    Examples
    --------
    >>> import pargraph
    >>> with pargraph.progress():
    ...     _ = pargraph.ones(3).sum().item()
    """
    return execution.showing_progress(minimum)
