"""Fusion and single-task runs: identical results, and the task counts the rules predict."""

import dask
import numpy as np
import pytest

import pargraph
from pargraph import fusion, nn
from pargraph.lowering import FusedTask, lower, plan

MODES = {
    "unfused": {"pargraph.fuse": False},
    "fused": {"pargraph.single-task-below": 0},
    "single task": {"pargraph.single-task-below": 1e9},
}


def training_step(settings, scheduler="threads"):
    """Two steps of a small MLP with Adam: every kind of node (forward, backward, fan-in,
    update). Returns the losses and the final parameters."""
    pargraph.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 16), nn.ReLU(),
                          nn.Linear(16, 3))
    opt = pargraph.optim.Adam(model.parameters(), lr=0.01)
    x, y = pargraph.randn(32, 6), pargraph.randint(0, 3, (32,))
    losses = []
    with dask.config.set({"scheduler": scheduler, **settings}):
        for _ in range(2):
            opt.zero_grad()
            hidden = model[:2](x)
            loss = nn.functional.cross_entropy(model[2:](hidden) + hidden[:, :3], y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
    return losses, [p.detach().numpy() for p in model.parameters()]


@pytest.mark.parametrize("scheduler", ["sync", "threads"])
def test_fusion_and_single_task_give_bit_identical_results(scheduler):
    reference_losses, reference_params = training_step(MODES["unfused"], scheduler)
    for mode in ("fused", "single task"):
        losses, params = training_step(MODES[mode], scheduler)
        assert losses == reference_losses, mode
        for a, b in zip(params, reference_params):
            np.testing.assert_array_equal(a, b)


def test_fused_results_identical_on_a_cluster(local_client):
    reference_losses, reference_params = training_step(MODES["unfused"], "sync")
    losses, params = training_step(MODES["fused"], local_client)
    assert losses == reference_losses
    for a, b in zip(params, reference_params):
        np.testing.assert_array_equal(a, b)


def _tasks(target, settings):
    with dask.config.set(settings):
        order, computed = plan([target._node])
        return lower(order, computed, [target._node]).graph, computed


def test_task_count_follows_the_fusion_rules():
    rng = np.random.default_rng(0)
    w1 = pargraph.tensor(rng.standard_normal((300, 300)))
    w2 = pargraph.tensor(rng.standard_normal((300, 300)))
    x = pargraph.tensor(rng.standard_normal((300, 300)))
    left = (x @ w1 + 1.0).relu()       # matmul, add, relu
    right = (x @ w2).tanh() * 2.0      # matmul, tanh, mul
    out = (left + right).sum()         # add, sum
    graph, computed = _tasks(out, MODES["unfused"])
    assert len([k for k, t in graph.items() if k in {n.key for n in computed}]) == 8
    graph, computed = _tasks(out, {"pargraph.single-task-below": 0})
    tasks = {k: t for k, t in graph.items() if hasattr(t, "func")}
    # Rule 3, branch by branch: each matmul joins its add/tanh (whose other inputs are
    # realized), which joins its relu/mul (which wait for nothing else). relu and mul feed the
    # join `add`, which also waits for the other branch, and are too expensive at 300x300 to
    # count as cheap: they stay roots, so the branches remain separate tasks that can run at
    # once. The join `add` joins `sum`, its only consumer, which waits for nothing else.
    roots = {computed_node.key for computed_node in computed} & set(tasks)
    assert len(tasks) == 3 and roots == set(tasks)
    members = sorted(len(t.func.steps) if isinstance(t.func, FusedTask) else 1
                     for t in tasks.values())
    assert members == [2, 3, 3]  # add+sum, and one branch of three nodes each
    graph, _ = _tasks(out, MODES["single task"])
    runs = [k for k in graph if k.startswith("pargraph_run-")]
    assert len(runs) == 1 and len(graph[runs[0]].func.steps) == 8


def test_views_are_recomputed_in_every_consumer():
    w = pargraph.tensor(np.ones((200, 200), dtype=np.float32))
    wt = w.T  # a view with two consumers
    a = (pargraph.ones(200, 200) @ wt).sum()
    b = (pargraph.ones(200, 200) * 3 @ wt).sum()
    with dask.config.set({"pargraph.single-task-below": 0}):
        order, computed = plan([a._node, b._node])
        groups = fusion.group(computed, {id(a._node), id(b._node)}, fusion.DEFAULT_FUSE_BELOW)
    holding_view = [g for g in groups if any(n is wt._node for n in g)]
    assert len(holding_view) == 2 and all(g[-1] is not wt._node for g in groups)
    assert a.item() == b.item() / 3


def test_small_runs_are_single_tasks_and_large_ones_are_not():
    small = [pargraph.ones(4).exp()._node, pargraph.ones(4).sin()._node]
    assert fusion.is_small(small, fusion.DEFAULT_SINGLE_TASK_BELOW)
    big = pargraph.ones(600, 600)
    assert not fusion.is_small([(big @ big)._node, (big @ big)._node],
                               fusion.DEFAULT_SINGLE_TASK_BELOW)


def test_trace_reports_the_members_of_fused_tasks():
    w = pargraph.ones(3, requires_grad=True)
    loss = ((w * 2).exp() + w).sum()
    expected = {n.key for n in pargraph.graph.toposort([loss._node]) if n.value is None}
    with pargraph.trace() as tr:
        loss.backward()
        pargraph.compute()
    keys = {r.key for r in tr.nodes()}
    assert expected <= keys and any(r.phase == "backward" for r in tr.nodes())


def test_trace_reports_fused_members_on_a_cluster(local_client):
    w = pargraph.ones(3, requires_grad=True)
    loss = ((w * 2).exp() + w).sum()
    expected = {n.key for n in pargraph.graph.toposort([loss._node]) if n.value is None}
    with dask.config.set(scheduler=local_client), pargraph.trace() as tr:
        loss.backward()
        pargraph.compute()
    assert expected <= {r.key for r in tr.nodes()}
