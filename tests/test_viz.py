"""``pargraph.visualize``: the recorded graph drawn with graphviz, every node and parameter
named."""

import re
import shutil
import sys

import pytest

import pargraph
from pargraph.viz import _graph_nodes


def _node_count(path):
    """Nodes drawn in a DOT source (``visualize`` into ``.gv``): statements with attributes
    that are neither edges nor the graph's defaults."""
    return len([line for line in path.read_text().splitlines()
                if "[" in line and "->" not in line
                and not line.strip().startswith(("graph ", "node ", "edge "))])


def _mlp():
    """The small model every drawing here is of: two Linear layers around a ReLU."""
    return pargraph.nn.Sequential(pargraph.nn.Linear(3, 4), pargraph.nn.ReLU(),
                                  pargraph.nn.Linear(4, 2))


#: Rendering needs Graphviz's programs, beyond what pip installs (.ci/run installs them);
#: the graphs themselves are checked in their DOT source everywhere.
needs_dot = pytest.mark.skipif(shutil.which("dot") is None,
                               reason="Graphviz's dot is not installed (apt-get install graphviz)")


def test_visualize_draws_every_node(tmp_path):
    model = _mlp()
    loss = model(pargraph.ones(5, 3)).sum()
    path = tmp_path / "graph.gv"
    pargraph.visualize(loss, path, params=dict(model.named_parameters()))
    nodes, grads = _graph_nodes(loss, backward=True)
    assert _node_count(path) == len(nodes) and len(grads) == 4
    text = path.read_text()
    assert "0.weight" in text and "matmul" in text
    forward_only = tmp_path / "forward.gv"
    pargraph.visualize(loss, forward_only, backward=False)
    assert _node_count(forward_only) == len(_graph_nodes(loss, backward=False)[0])
    assert _node_count(forward_only) < len(nodes)


def test_visualize_collapses_by_module(tmp_path):
    model = _mlp()
    loss = model(pargraph.ones(5, 3)).sum()
    source = tmp_path / "collapsed.gv"
    pargraph.visualize(loss, source, collapse="module")
    text = source.read_text()
    assert "0 (Linear) forward" in text and "2 (Linear) backward" in text
    assert _node_count(source) < len(_graph_nodes(loss, backward=True)[0])
    with pytest.raises(ValueError, match="collapse must be None or 'module'"):
        pargraph.visualize(loss, source, collapse="layer")


@needs_dot
def test_visualize_renders_png_and_svg_with_graphviz(tmp_path):
    model = _mlp()
    loss = model(pargraph.ones(5, 3)).sum()
    png = tmp_path / "collapsed.png"
    pargraph.visualize(loss, png, collapse="module")
    assert png.read_bytes()[:4] == b"\x89PNG"
    svg, source = tmp_path / "graph.svg", tmp_path / "graph.gv"
    pargraph.visualize(loss, svg)
    pargraph.visualize(loss, source)
    assert len(re.findall(r'class="node"', svg.read_text())) == _node_count(source)


def test_visualize_after_backward_and_step_draws_the_recorded_graph(tmp_path):
    model = _mlp()
    opt = pargraph.optim.SGD(model.parameters(), lr=0.1)
    loss = model(pargraph.ones(5, 3)).sum()
    expected = len(_graph_nodes(loss, backward=True)[0])
    loss.backward()
    opt.step()  # the README's order: backward, step, then draw
    path = tmp_path / "graph.gv"
    pargraph.visualize(loss, path, params=dict(model.named_parameters()))
    assert _node_count(path) == expected
    pargraph.visualize(loss, tmp_path / "modules.gv", collapse="module")
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()  # drawing did not make the freed graph runnable


@pytest.mark.parametrize("optimizer", ["SGD", "Adam"])
def test_visualize_after_step_still_names_every_parameter(optimizer, tmp_path):
    model = _mlp()
    opt = getattr(pargraph.optim, optimizer)(model.parameters(), lr=0.1)
    loss = model(pargraph.ones(5, 3)).sum()
    loss.backward()
    opt.step()  # the parameters hold new nodes; the drawn graph reads the old ones
    path = tmp_path / "graph.gv"
    pargraph.visualize(loss, path, params=dict(model.named_parameters()))
    drawn = path.read_text()
    assert all(f'label="{name}' in drawn for name, _ in model.named_parameters()), drawn[:2000]


def test_visualize_says_how_to_install_graphviz(tmp_path, monkeypatch):
    import graphviz

    loss = (pargraph.ones(2, requires_grad=True) * 2).sum()
    monkeypatch.setenv("PATH", str(tmp_path))  # no `dot` here
    with pytest.raises(RuntimeError, match=r"needs Graphviz's `dot` program.*apt-get install"):
        pargraph.visualize(loss, tmp_path / "g.svg")
    monkeypatch.setitem(sys.modules, "graphviz", None)  # the package is missing
    with pytest.raises(ImportError, match=r"pip install graphviz"):
        pargraph.visualize(loss, tmp_path / "g.svg")
    assert graphviz  # imported before the patch
