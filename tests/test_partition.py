"""Partitioning into coarse tasks: identical results, acyclic groups, the task counts the
algorithm predicts, the plan cache, and the choice between threads and one thread."""

import itertools
import pickle
from collections import Counter
from collections.abc import Callable

import dask
import numpy as np
import pytest
from dask.task_spec import TaskRef

import pargraph
from pargraph import nn
from pargraph.engine import modes
from pargraph.engine.lowering import PlanCache, is_small, lower, plan
from pargraph.engine.modes import MODES as WAYS
from pargraph.engine.modes import RETRY_EVERY, RETRY_PERIOD, ModeChoice
from pargraph.engine.partition import Granularity, estimated_seconds, partition, placed_partition
from pargraph.graph import format_site
from pargraph.runtime import FusedTask, NodeTask
from tests.models import MeanOfTowers

MODES = {
    "one task per node": {"pargraph.fuse": False},
    "partitioned": {"pargraph.single-task-below": 0},
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
        for _ in range(14):  # past the adaptive choice's trials of the three ways to run
            opt.zero_grad()
            hidden = model[:2](x)
            loss = nn.functional.cross_entropy(model[2:](hidden) + hidden[:, :3], y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
    return losses, [p.detach().numpy() for p in model.parameters()]


@pytest.mark.parametrize("scheduler", ["sync", "threads"])
def test_partitioned_and_single_task_runs_are_bit_identical(scheduler):
    reference_losses, reference_params = training_step(MODES["one task per node"], scheduler)
    for mode in ("partitioned", "single task"):
        losses, params = training_step(MODES[mode], scheduler)
        assert losses == reference_losses, mode
        for a, b in zip(params, reference_params):
            np.testing.assert_array_equal(a, b)


def test_partitioned_results_identical_on_a_cluster(local_client):
    reference_losses, reference_params = training_step(MODES["one task per node"], "sync")
    losses, params = training_step(MODES["partitioned"], local_client)
    assert losses == reference_losses
    for a, b in zip(params, reference_params):
        np.testing.assert_array_equal(a, b)


def _quotient_is_acyclic(groups):
    group_of = {id(n): g for g, members in enumerate(groups) for n in members}
    inside = [{id(n) for n in members} for members in groups]  # a copied node reads nothing
    edges = {(group_of[id(i)], g) for g, members in enumerate(groups) for n in members
             for i in n.input_nodes() if id(i) in group_of and id(i) not in inside[g]}
    remaining, reached = set(range(len(groups))), True
    while remaining and reached:
        reached = False
        for g in sorted(remaining):
            if not any(a in remaining for a, b in edges if b == g):
                remaining.discard(g)
                reached = True
    return not remaining


def _towers_step(towers=4, width=512, batch=512):
    pargraph.manual_seed(0)
    model = nn.ModuleList(nn.Sequential(nn.Linear(256, width), nn.ReLU(),
                                        nn.Linear(width, 10)) for _ in range(towers))
    x, y = pargraph.randn(batch, 256), pargraph.randint(0, 10, (batch,))
    loss = nn.functional.cross_entropy(pargraph.stack([t(x) for t in model]).mean(0), y)
    loss.backward()
    targets = [p.grad._node for p in model.parameters()] + [loss._node]
    return model, plan(targets)[1]


def test_more_threads_never_make_a_towers_step_a_longer_task():
    """The towers' backward passes each read the loss's gradient, one group: joined into it,
    they would run one after another in its task. They join it only where that costs no more
    than the tasks it saves, so on more threads no task holds more work than on fewer, and
    on one thread, where nothing runs side by side, they join."""
    _, computed = _towers_step(towers=8, width=256, batch=256)
    largest = []
    for workers in (1, 2, 4, 8, 16, 32):
        groups = partition(computed, Granularity(workers=workers))
        assert _quotient_is_acyclic(groups)
        largest.append(max(sum(estimated_seconds(n) for n in members) for members in groups))
    assert largest == sorted(largest, reverse=True), largest
    assert largest[-1] < largest[0] / 4


def test_a_towers_step_becomes_a_few_tasks_per_tower():
    model, computed = _towers_step()
    groups = partition(computed, Granularity(workers=2))
    assert _quotient_is_acyclic(groups)
    for members in groups:
        position = {id(n): k for k, n in enumerate(computed)}
        assert [position[id(n)] for n in members] == sorted(position[id(n)] for n in members)
    assert sorted(id(n) for m in groups for n in m) == sorted(id(n) for n in computed)
    group_of = {id(n): g for g, members in enumerate(groups) for n in members}
    for k in range(4):  # each tower's forward pass is one task, its backward another
        for phase in ("forward", "backward"):
            tasks = {group_of[id(n)] for n in computed
                     if n.phase == phase and n.scope.startswith(f"{k}.")}
            assert len(tasks) == 1, (k, phase, tasks)
    assert len(groups) <= 4 * 2 + 1  # each tower's forward and backward; the loss
    # The loss reads every tower: no tower's forward is in its task, where it would wait for
    # all the other towers before it could start.
    stack = next(n for n in computed if n.op.name == "stack")
    assert not any(n.op.name == "linear" for n in groups[group_of[id(stack)]])


def _task_critical_path(groups, work):
    """The longest chain of tasks, each starting when every group it reads from has ended (a
    copied node is computed by its reader), and the longest chain of nodes: (tasks, nodes)."""
    group_of = {}
    for g, members in enumerate(groups):
        for n in members:
            group_of.setdefault(id(n), g)
    end, finish = [0.0] * len(groups), {}
    for g, members in enumerate(groups):  # groups come in an order that runs
        inside = {id(n) for n in members}
        start = max((end[group_of[id(i)]] for n in members for i in n.input_nodes()
                     if id(i) in group_of and id(i) not in inside), default=0.0)
        end[g] = start + sum(work[id(n)] for n in members)
        for n in members:
            finish[id(n)] = max((finish.get(id(i), 0.0) for i in n.input_nodes()),
                                default=0.0) + work[id(n)]
    return max(end), max(finish.values())


@pargraph.library.custom_op("test::cell", mutates_args=(), cost=20e-3)
def _cell(x):
    return x + 1.0


_cell.register_fake(lambda x: pargraph.empty_like(x))


def _cell_setup(ctx, inputs, output):
    ctx.save_for_backward(output)


_cell.register_autograd(lambda ctx, grad: _cell(grad) * ctx.saved_tensors[0],
                        setup_context=_cell_setup)


def test_the_directions_of_a_stacked_bidirectional_rnn_run_side_by_side():
    """Each layer's two directions are chains of cells (20 ms each, declared) that start
    together; each step of the next layer reads the sum of both. A task starts when all its
    inputs are there, so a value one chain's task computes and a later chain reads would tie
    that later chain to the whole of the first: the tasks' longest chain must stay that of
    the nodes, forward and backward."""
    x = pargraph.ones(4, requires_grad=True)
    steps, inputs = 8, [x * (t + 1) for t in range(8)]
    for _ in range(2):
        directions = []
        for order in (range(steps), reversed(range(steps))):
            h, outs = x, {}
            for t in order:
                h = outs[t] = _cell(h + inputs[t])
            directions.append(outs)
        inputs = [directions[0][t] + directions[1][t] for t in range(steps)]
    loss = pargraph.stack(inputs).sum()
    loss.backward()
    computed = plan([x.grad._node, loss._node])[1]

    work = {id(n): estimated_seconds(n) for n in computed}
    groups = partition(computed, Granularity(workers=4))
    assert _quotient_is_acyclic(groups)
    tasks, nodes = _task_critical_path(groups, work)
    assert tasks <= 1.1 * nodes, (tasks, nodes, len(groups))


@pytest.mark.parametrize("workers", [2, 4])
def test_branches_that_read_one_input_share_out_the_workers(workers):
    """Units that read one parameter share a worker; 16 branches that all read the input
    being trained would then all run on one, the others idle."""
    x = pargraph.ones(4, requires_grad=True)
    loss = pargraph.stack([_cell(x * (k + 1)) for k in range(16)]).sum()
    loss.backward()
    computed = plan([x.grad._node, loss._node])[1]
    from pargraph.engine.partition import estimated_seconds

    hosts = tuple((f"tcp://127.0.0.1:{k + 1}", 1) for k in range(workers))
    groups, where = placed_partition(computed, Granularity.of(True, workers, hosts=hosts))
    load = Counter()
    for members, worker in zip(groups, where):
        load[worker] += sum(estimated_seconds(n) for n in members)
    assert len(load) == workers
    assert max(load.values()) <= 1.1 * sum(load.values()) / workers, load


TWO_WORKERS = Granularity.of(True, 2, hosts=(("tcp://127.0.0.1:1", 1), ("tcp://127.0.0.1:2", 1)))


def _branches_of_a_slice(count):
    pargraph.manual_seed(0)
    x = pargraph.randn(512, 256)
    weights = [pargraph.randn(256, 256, requires_grad=True) for _ in range(count)]
    head = x[:256]  # a view of a value held before the run: no work
    return x, head, weights, [(head @ w).tanh() @ w for w in weights]


def test_a_slice_branches_read_is_computed_by_each_branch_which_waits_for_none():
    x, head, weights, branches = _branches_of_a_slice(2)
    computed = plan([b._node for b in branches])[1]
    groups = partition(computed, Granularity(workers=2))
    assert len(groups) == 2 and all(head._node in members for members in groups)
    inside = [{id(n) for n in members} for members in groups]
    assert not any(id(i) not in inside[g] and i.value is None  # reads no other group
                   for g, members in enumerate(groups) for n in members for i in n.input_nodes())
    with dask.config.set(scheduler="threads", **{"pargraph.single-task-below": 0}):
        values = [b.detach().numpy() for b in pargraph.compute(*branches)]
    for value, w in zip(values, weights):  # as one task per node computes them
        with dask.config.set({"pargraph.fuse": False}):
            unfused = ((x[:256] @ w).tanh() @ w).detach().numpy()
        # (not to the bit: the two tasks' products run on one BLAS thread each, through MKL
        # where installed, the unfused run's on numpy's BLAS with every core: sums of 256
        # float32 products this size differ by up to 1e-4)
        np.testing.assert_allclose(value, unfused, rtol=1e-5, atol=5e-4)


def test_a_fanned_out_slice_is_no_task_of_its_own_unless_the_run_returns_it():
    _, head, _, branches = _branches_of_a_slice(4)  # placed: a fan-out ends its chain
    computed = plan([b._node for b in branches])[1]
    groups, _ = placed_partition(computed, TWO_WORKERS)
    assert [head._node] not in groups
    assert len(groups) >= 2 and all(head._node in members for members in groups)
    groups, _ = placed_partition(computed, TWO_WORKERS, outputs=[head._node])
    assert [head._node] in groups


def test_a_long_chain_of_tiny_ops_is_not_copied_into_later_tasks():
    x = pargraph.tensor(np.linspace(0.1, 1.0, 16), requires_grad=True)
    y = x
    for k in range(1500):  # ops of next to no work each, but not all together
        y = y.tanh() if k % 50 == 0 else y * 0.9999 + 0.001
    y.sum().backward()
    targets = [x.grad._node]
    computed = plan(targets)[1]
    groups = partition(computed, Granularity(workers=2, single_task_below=0))
    copies = sum(len(members) for members in groups) - len(computed)
    assert len(groups) > 1 and copies <= 2  # the gradient's seed, say: not the chain before


@pytest.mark.parametrize("steps", [5, 23])
def test_a_recurrent_backward_is_one_chain_though_each_step_reads_two_slices_of_the_last(steps):
    """Each LSTM cell's backward reads two slices of the last step's gradients (the hidden
    and the cell state's): the second slice is a side read of the chain, not a task of its
    own that cuts the chain at every step (coarsening is off: the chain's own grouping)."""
    pargraph.manual_seed(0)
    cell = nn.LSTMCell(8, 16)
    h = c = pargraph.zeros(4, 16)
    for x in pargraph.randn(steps, 4, 8):  # a loop of cells, as a char-RNN writes it
        h, c = cell(x, (h, c))
    h.sum().backward()
    computed = plan([p.grad._node for p in cell.parameters()])[1]
    groups = partition(computed, Granularity(workers=2, single_task_below=0, grain=0))
    assert _quotient_is_acyclic(groups)
    backward_groups = {g for g, members in enumerate(groups)
                       for n in members if n.op.name == "lstm_cell_grads"}
    assert sum(n.op.name == "lstm_cell_grads" for n in computed) == steps
    assert len(backward_groups) <= 2, len(backward_groups)


def _parameter_workers(model, groups, workers) -> list[set[int]]:
    """For each tower of ``model``, the workers of the groups that read its parameters."""
    found = []
    for tower in model.towers:
        ids = {id(p._node) for p in tower.parameters()}
        found.append({w for members, w in zip(groups, workers)
                      if any(id(i) in ids for n in members for i in n.input_nodes())})
    return found


def test_a_placed_data_parallel_step_keeps_each_tower_with_its_parameters():
    pargraph.manual_seed(0)
    model = MeanOfTowers(nn.ModuleList(nn.Sequential(nn.Linear(256, 512), nn.ReLU(),
                                                     nn.Linear(512, 10)) for _ in range(4)))
    parallel = nn.DataParallel(model, shards=2)
    x, y = pargraph.randn(512, 256), pargraph.randint(0, 10, (512,))
    nn.functional.cross_entropy(parallel(x), y).backward()
    targets = [p.grad._node for p in model.parameters()]
    computed = plan(targets)[1]
    groups, workers = placed_partition(computed, TWO_WORKERS)
    assert len(workers) == len(groups) and _quotient_is_acyclic(groups)
    per_tower = _parameter_workers(model, groups, workers)
    assert all(len(found) == 1 for found in per_tower), per_tower  # parameters never travel
    assert {w for found in per_tower for w in found} == {0, 1}  # and both workers compute
    copies = Counter(id(n) for members in groups for n in members)
    assert set(copies) == {id(n) for n in computed}
    # The batch's shards, which every tower reads, are no tasks the towers wait for (and
    # fetch from the other worker): each tower's task slices the shard it reads.
    shards = [n for n in computed if any(i is x._node for i in n.inputs)]
    assert shards and all(copies[id(n)] > 1 for n in shards)
    assert all(any(copies[id(n)] == 1 for n in members) for members in groups)
    # on values held before the run only
    assert all(i.value is not None or copies[id(i)] > 1 for n in shards for i in n.input_nodes())


def _data_parallel_towers_step():
    """A backward pass of four towers in a 2-shard DataParallel: the loss, the run's outputs
    (gradients and loss), and the run's order and computed nodes."""
    pargraph.manual_seed(0)
    model = MeanOfTowers(nn.ModuleList(nn.Sequential(nn.Linear(256, 512), nn.ReLU(),
                                                     nn.Linear(512, 10)) for _ in range(4)))
    parallel = nn.DataParallel(model, shards=2)
    x, y = pargraph.randn(512, 256), pargraph.randint(0, 10, (512,))
    loss = nn.functional.cross_entropy(parallel(x), y)
    loss.backward()
    outputs = [p.grad._node for p in model.parameters()] + [loss._node]
    return (loss, outputs, *plan(outputs))


def test_placed_backward_tasks_wait_for_no_other_workers_backward_or_loss():
    """The loss and the split of its gradient into shards are next to no work: each worker's
    backward tasks compute them again from both workers' logits instead of waiting for a
    loss task, or for a task on the other worker that its partitioning bundled them into."""
    loss, outputs, _, computed = _data_parallel_towers_step()
    groups, workers = placed_partition(computed, TWO_WORKERS, outputs=outputs)
    home = {}
    for g, members in enumerate(groups):  # where a value is read from: its first group
        for n in members:
            home.setdefault(id(n), g)
    for g, members in enumerate(groups):
        inside = {id(n) for n in members}
        for h in {home[id(i)] for n in members for i in n.input_nodes()
                  if id(i) in home and id(i) not in inside}:
            if workers[h] != workers[g]:  # only the towers' forward passes travel
                assert all(n.phase == "forward" and n.op.name != "log_softmax"
                           for n in groups[h]), (g, h, [n.op.name for n in groups[h]])
    assert len(groups) <= 10 and {0, 1} == set(workers)


def test_on_a_cluster_the_loss_the_client_fetches_is_a_task_of_its_own():
    """The loss comes back with the run for the ``item()`` after the step: in a worker's
    backward task, the client would wait for all of that task, then for a task picking the
    loss out of its tuple. It is a small task of its own instead (with what it takes from the
    towers' logits), and the lowering fetches its tuple without a picking task."""
    loss, outputs, order, computed = _data_parallel_towers_step()
    groups, workers = placed_partition(computed, TWO_WORKERS, outputs=outputs)
    assert _quotient_is_acyclic(groups)
    own, = [members for members in groups if loss._node in members]
    assert own[-1] is loss._node and len(own) < 12
    assert all(n.phase == "forward" for n in own)
    assert Counter(id(n) for members in groups for n in members)[id(loss._node)] == 1
    lowered = lower(order, computed, outputs, TWO_WORKERS)
    fetched = lowered.keys[-1]
    assert lowered.fetched == 1 and fetched in lowered.urgent
    assert lowered.graph[fetched].func.nodes[-1].key == loss._node.key
    assert loss._node.key not in lowered.graph  # no task picks the loss out of a tuple


def test_a_placed_chain_stays_on_one_worker():
    """Layers of one chain cannot overlap: spreading them would only add transfers."""
    pargraph.manual_seed(0)
    model = nn.Module()
    model.towers = nn.ModuleList([nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 16),
                                                nn.ReLU(), nn.Linear(16, 10))])
    x, y = pargraph.randn(256, 64), pargraph.randint(0, 10, (256,))
    nn.functional.cross_entropy(model.towers[0](x), y).backward()
    computed = plan([p.grad._node for p in model.parameters()])[1]
    groups, workers = placed_partition(computed, Granularity.of(
        True, 2, single_task_below=0, grain=0, hosts=TWO_WORKERS.hosts))
    assert len(groups) > 1
    assert len(_parameter_workers(model, groups, workers)[0]) == 1


def test_small_independent_branches_are_bundled_but_keep_two_per_worker():
    pargraph.manual_seed(0)
    x = pargraph.randn(64, 64)
    weights = [pargraph.randn(64, 64) for _ in range(32)]
    branches = [((x @ w).relu() @ w).tanh() for w in weights]  # 32 x ~0.1 ms of work
    computed = plan([b._node for b in branches])[1]
    groups = partition(computed, Granularity(workers=2))
    assert 4 <= len(groups) < 32
    assert _quotient_is_acyclic(groups)


def test_on_a_cluster_small_branches_are_one_bundle_per_worker_thread():
    """A worker hears of its next task only once the scheduler heard that the last one
    finished: every task more on a worker is a gap, so a cluster gets one bundle of a depth
    per worker thread where local threads get two."""
    pargraph.manual_seed(0)
    x = pargraph.randn(64, 64)
    weights = [pargraph.randn(64, 64) for _ in range(32)]
    computed = plan([((x @ w).relu() @ w).tanh()._node for w in weights])[1]
    for threads in (1, 2):
        hosts = (("tcp://127.0.0.1:1", threads), ("tcp://127.0.0.1:2", threads))
        groups, workers = placed_partition(computed, Granularity.of(True, 2 * threads,
                                                                    hosts=hosts))
        assert sorted(Counter(workers).values()) == [threads, threads]
        assert _quotient_is_acyclic(groups)


def test_two_branches_and_a_join():
    rng = np.random.default_rng(0)
    w1, w2, x = (pargraph.tensor(rng.standard_normal((300, 300))) for _ in range(3))
    left = (x @ w1 + 1.0).relu()       # matmul, add, relu: one chain
    right = (x @ w2).tanh() * 2.0      # matmul, tanh, mul: another chain
    # The join and the sum are a task of their own: in either branch's task they would make
    # that whole branch wait for the other one (a task starts when all its inputs are there).
    out = (left + right).sum()
    computed = plan([out._node])[1]
    groups = partition(computed, Granularity(workers=2))
    assert sorted(len(g) for g in groups) == [2, 3, 3]
    assert [n.op.name for n in groups[-1]] == ["add", "sum"]
    lowered = lower(*plan([out._node]), [out._node], Granularity.of(False, 2, True, 0))
    tasks = [t for t in lowered.graph.values() if isinstance(getattr(t, "func", None),
                                                               FusedTask)]
    assert len(tasks) == 3 and lowered.tasks == 3
    np.testing.assert_allclose(
        out.item(), float((np.maximum(x.numpy() @ w1.numpy() + 1, 0)
                           + np.tanh(x.numpy() @ w2.numpy()) * 2).sum()), rtol=1e-6)


class _Twice(pargraph.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


def _first_level_tasks(out):
    """The group tasks of ``out``'s run that read no other task, with their arguments."""
    lowered = lower(*plan([out._node]), [out._node], Granularity.of(False, 2, True, 0))
    return [(t.func, t.args) for t in lowered.graph.values()
            if isinstance(getattr(t, "func", None), FusedTask)
            and not any(isinstance(a, TaskRef) for a in t.args)]


def test_a_group_task_pickles_as_columns_and_computes_the_same_after_the_trip():
    # A step's graph travels to the scheduler and on to a worker every step: each member's
    # site, repeated per node before, is pickled once, and the task computes the same.
    rng = np.random.default_rng(0)
    w1, w2, x = (pargraph.tensor(rng.standard_normal((200, 200))) for _ in range(3))
    left = (((x @ w1 + 1.0).relu() - 0.5) * 3.0).tanh()
    out = (left + (x @ w2).tanh() * 2.0).sum()
    tasks = _first_level_tasks(out)
    assert len(tasks) == 2
    for task, args in tasks:
        data = pickle.dumps(task)
        site = format_site(task.nodes[0].site).encode()
        assert len(task.nodes) >= 3 and data.count(site) == 1
        assert len(data) < len(pickle.dumps([NodeTask.of(node) for node in task.nodes]))
        trip = pickle.loads(data)
        assert all(type(node) is NodeTask for node in trip.nodes)
        assert [(n.key, n.op, n.dtype, n.shape, n.attrs) for n in trip.nodes] == \
            [(n.key, n.op, n.dtype, n.shape, n.attrs) for n in task.nodes]
        np.testing.assert_array_equal(trip(*args), task(*args))


def test_a_group_task_with_a_users_function_ships_the_function():
    rng = np.random.default_rng(0)
    w1, w2, x = (pargraph.tensor(rng.standard_normal((200, 200)), requires_grad=True)
                 for _ in range(3))
    out = (_Twice.apply((x @ w1).relu()) + (x @ w2).tanh()).sum()
    tasks = [(task, args) for task, args in _first_level_tasks(out)
             if any(n.op.name == "_Twice" for n in task.nodes)]
    assert len(tasks) == 1
    task, args = tasks[0]
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(task))(*args), task(*args))


def test_small_runs_are_single_tasks_and_large_ones_are_not():
    small = [pargraph.ones(4).exp()._node, pargraph.ones(4).sin()._node]
    assert is_small(small, Granularity().single_task_below)
    big = pargraph.ones(600, 600)
    assert not is_small([(big @ big)._node, (big @ big)._node], Granularity().single_task_below)


def test_the_plan_is_cached_by_structure():
    model = nn.Linear(64, 64)
    hits, misses = PlanCache.hits, PlanCache.misses
    with dask.config.set({"pargraph.single-task-below": 0}):
        for batch in (256, 256, 256, 128):
            model.zero_grad()
            model(pargraph.randn(batch, 64)).relu().sum().backward()
            pargraph.compute()
    assert PlanCache.misses - misses == 2  # the first step, then the new batch size
    assert PlanCache.hits - hits == 2


def test_the_faster_way_to_run_a_structure_wins():
    chosen = ModeChoice()
    modes = [chosen.choose() for _ in range(6)]
    assert modes == ["threads"] * 6  # until it has three timed runs
    # The first run after a switch is not timed, nor those within SETTLE seconds of the
    # structure's first run.
    for seconds in (0.150, 0.010, 0.011, 0.012):
        chosen.record("threads", seconds)
    assert chosen.choose() == "inline, one BLAS thread"  # not timed yet
    for seconds in (0.150, 0.005, 0.006, 0.004):
        chosen.record("inline, one BLAS thread", seconds)
    assert chosen.choose() == "inline, one BLAS thread"
    for seconds in (0.150, 0.001, 0.001, 0.001):
        chosen.record("threads", seconds)
    assert chosen.choose() == "threads"


def test_the_faster_way_wins_though_switching_ways_costs_a_run():
    """The first run after a switch pays for it (BLAS's threads, memory other threads had
    not mapped): timed, it made threads look slower on the wide step than one thread, and
    made the choice flip back and forth at that price."""
    chosen = ModeChoice()
    cost = {"threads": 0.060, "inline, one BLAS thread": 0.070}
    switch = 0.045
    modes, last = [], None
    recorded = []
    for _ in range(150):
        mode = chosen.choose()
        recorded.append(cost[mode] + (switch if mode != last else 0.0))
        chosen.record(mode, recorded[-1])
        modes.append(mode)
        last = mode
    # Each way: the switch, three timed runs (as the process's first way, SETTLE seconds
    # more: here one run); then the fastest until RETRY_EVERY runs and RETRY_PERIOD seconds
    # of runs passed; then the other way until it is timed (a switch and a run); then the
    # fastest again.
    ways = [(mode, len(list(runs))) for mode, runs in itertools.groupby(modes)]
    explored = [("threads", 5), ("inline, one BLAS thread", 4)]
    assert ways[:2] == explored and len(ways) >= 4
    assert all(mode == "threads" for mode, _ in ways[2::2])
    assert all(way == ("inline, one BLAS thread", 2) for way in ways[3:-1:2])

    def due(run: int) -> bool:  # whether a retry is due at run ``run`` (from 0), the first
        return run + 1 >= RETRY_EVERY and sum(recorded[:run]) >= RETRY_PERIOD

    first = sum(n for _, n in explored) + ways[2][1]
    assert due(first) and not due(first - 1)


def _ways(slowdown: Callable[[int], float], runs: int) -> list[str]:
    """The ways a new ModeChoice picks when threads take 5 ms and one thread 9 ms, threaded
    run ``k`` taking ``slowdown(k)`` times longer (the machine's noise)."""
    chosen, modes = ModeChoice(), []
    for k in range(runs):
        mode = chosen.choose()
        chosen.record(mode, 0.005 * slowdown(k) if mode == "threads" else 0.009)
        modes.append(mode)
    return modes


def only_retries(ways: list[str], kept: str) -> bool:
    """Whether ``ways`` kept the way ``kept``, taking another only to retry it: a switch and
    one timed run, at most once in RETRY_EVERY runs."""
    others = [len(list(runs)) for mode, runs in itertools.groupby(ways) if mode != kept]
    return kept in ways and all(n <= 2 for n in others) and len(others) <= (
        len(ways) // RETRY_EVERY + 1)


def test_a_burst_of_slow_runs_does_not_switch_ways_but_a_lasting_slowdown_does():
    """Noise only slows runs, and comes in bursts (another process on a core): three slow
    threaded runs in a row do not switch ways. A slowdown that lasts still does, and a retry
    switches back once it is over."""
    burst = _ways(lambda k: 2.5 if 600 <= k < 603 else 1.0, 1500)
    assert only_retries(burst[500:], "threads") and burst.count("threads") > 1300
    lasting = _ways(lambda k: 2.5 if 600 <= k < 2000 else 1.0, 4000)
    assert only_retries(lasting[700:2000], "inline, one BLAS thread")
    assert only_retries(lasting[2200:], "threads")


def _ways_after_free_runs(free_before: Callable[[int], bool], runs: int,
                          heed: bool = True) -> list[str]:
    """The ways a ModeChoice picks, threads taking 5 ms and one thread 9 ms (on a clock the
    test keeps), where ``free_before(k)`` says whether another structure's run that left
    BLAS's threads free ended right before run ``k``; they spin for 0.1 s after
    it, making a threaded run take 12 ms meanwhile (``heed``: whether the choice is told).
    """
    chosen, ways, now, free_end = ModeChoice(), [], 1.0, -1.0
    for k in range(runs):
        if free_before(k):
            now += 0.017  # that run
            free_end = now
        mode = chosen.choose()
        seconds = 0.009 if mode != "threads" else 0.012 if now - free_end < 0.1 else 0.005
        spinning = chosen.meets_spinning_blas(now, free_end) and heed
        chosen.ended(mode, now, now + seconds, spinning)
        now += seconds
        ways.append(mode)
    return ways


def test_runs_that_meet_blas_spinning_after_another_structures_run_are_not_timed():
    """BLAS's threads spin for about 0.1 s after a run that left them free (a block of
    one-thread steps, then steps on two threads): timed, the threaded runs meanwhile make
    threads look slower than one thread, which the runner keeps until its next retry. After a
    block of such runs, the next ones are not timed for SETTLE seconds; where such a run comes
    before every run, the spinning is part of the cost and is timed."""
    def blocks(k: int) -> bool:
        return k >= 400 and k % 100 == 0  # a block of another structure's runs, now and then

    assert only_retries(_ways_after_free_runs(blocks, 1000)[300:], "threads")
    # timed, the spinning runs switch the way after such a block, until the next retry
    assert _ways_after_free_runs(blocks, 1000, heed=False)[300:].count(
        "inline, one BLAS thread") > 100
    # before every run: threads' 12 ms are their cost, and one thread (9 ms) wins
    every = _ways_after_free_runs(lambda k: True, 600)
    assert only_retries(every[-300:], "inline, one BLAS thread")


def test_the_process_counts_the_runs_of_each_way_the_runner_chose():
    """``scheduling.ran`` counts the runs whose way the runner chose, by way, timed or not; a
    way forced through ``pargraph.adaptive`` is not the runner's choice: what
    benchmarks.forecast reports of the runner's way."""
    chosen, picked = ModeChoice(), []
    before = Counter(modes.scheduling.ran)
    for _ in range(120):
        mode = chosen.choose()
        modes.timed(chosen, mode, lambda: None)
        picked.append(mode)
    modes.timed(None, "threads", lambda: None)  # forced: not counted
    assert {mode: modes.scheduling.ran[mode] - before[mode] for mode in modes.MODES} == \
        {mode: picked.count(mode) for mode in modes.MODES}


def test_a_run_that_leaves_blas_free_says_when_it_ended():
    """A run whose big product keeps all of BLAS's threads notes its end
    (``Scheduling.blas_free_end``); one whose products OpenBLAS keeps on one thread does
    not."""
    a, small = pargraph.randn(768, 768), pargraph.randn(4, 4)
    with dask.config.set(scheduler="threads", num_workers=2):
        before = modes.scheduling.blas_free_end
        (small @ small).sum().item()
        assert modes.scheduling.blas_free_end == before
        (a @ a).sum().item()
        assert modes.scheduling.blas_free_end > before


def test_the_first_way_is_timed_once_the_process_has_warmed_up():
    """A process's first threaded runs are slow (the pool's threads start, their allocator
    arenas grow): timed then, threads lost to one thread in the branchy step's first runs and
    kept losing until the first retry, six seconds later."""
    steady = {"threads": 0.007, "inline, one BLAS thread": 0.012}
    chosen = ModeChoice()
    spent, modes = 0.0, []
    for _ in range(200):
        mode = chosen.choose()
        seconds = 0.013 if mode == "threads" and spent < 0.1 else steady[mode]
        chosen.record(mode, seconds)
        spent += seconds
        modes.append(mode)
    assert modes[-100:] == ["threads"] * 100


def _blas_threads() -> int | None:
    from threadpoolctl import threadpool_info

    return max((i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"),
               default=None)


@pytest.mark.parametrize("width", [128, 2048])
def test_every_way_the_runner_may_choose_trains_to_the_same_bits(width):
    """The runner picks a structure's way by timing, and a float32 product's bits depend on
    BLAS's threads: when the way with BLAS free for every op was among the runner's, a
    program trained twice from one seed could end with different parameters (digits.py's
    eager and compiled runs did, now and then). Products of 64 x 64 by 64 x ``width`` give
    different bits on one and two BLAS threads; 2048 wide, the run keeps BLAS's threads."""
    def train(mode):
        pargraph.manual_seed(0)
        model = nn.Sequential(nn.Linear(64, width), nn.ReLU(), nn.Linear(width, 10))
        opt = pargraph.optim.SGD(model.parameters(), lr=0.1)
        x, y = pargraph.randn(64, 64), pargraph.randint(0, 10, (64,))
        with dask.config.set({"scheduler": "threads", "pargraph.adaptive": mode}):
            for _ in range(3):
                opt.zero_grad()
                nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
        return [p.detach().numpy() for p in model.parameters()]

    first, *others = [train(mode) for mode in WAYS]
    for params in others:
        for a, b in zip(first, params):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("mode", ["inline", "inline, one BLAS thread"])
def test_a_run_in_one_thread_gives_blas_every_core_or_one(monkeypatch, mode):
    from pargraph import ops

    seen, relu = [], ops.REGISTRY["relu"]
    forward = relu.forward

    def recording(*args, **kwargs):
        seen.append(_blas_threads())
        return forward(*args, **kwargs)

    monkeypatch.setattr(relu, "forward", recording)
    free = _blas_threads()
    model, _ = _towers_step(towers=2, width=64, batch=64)
    with dask.config.set({"scheduler": "threads", "pargraph.adaptive": mode,
                          "pargraph.single-task-below": 0}):
        pargraph.compute()
    assert len(seen) == 2 and set(seen) == {1 if mode.endswith("thread") else free}
    assert _blas_threads() == free


def test_the_sync_scheduler_runs_group_tasks_in_order_without_its_costs_per_task():
    """dask's sync scheduler runs tasks one after another in the calling thread, at ~75 us a
    task: pargraph runs the group tasks so itself (the same results), unless
    ``pargraph.adaptive`` is off (as the shared scheduler tests set it, to test dask's).
    The step's chains stay groups of their own (``pargraph.task-grain`` 0): for one thread the
    partition merges this small step into one task."""
    from dask.callbacks import Callback

    seen = []
    counting = Callback(pretask=lambda key, dsk, state: seen.append(key))
    results = {}
    for adaptive in (True, False):
        seen.clear()
        with counting, dask.config.set({"scheduler": "sync", "pargraph.adaptive": adaptive,
                                        "pargraph.single-task-below": 0,
                                        "pargraph.task-grain": 0}):
            results[adaptive] = training_step({}, "sync")
        assert bool(seen) is not adaptive
    assert results[True][0] == results[False][0]
    for a, b in zip(results[True][1], results[False][1]):
        np.testing.assert_array_equal(a, b)


def test_trace_reports_the_members_of_group_tasks():
    w = pargraph.ones(3, requires_grad=True)
    loss = ((w * 2).exp() + w).sum()
    expected = {n.key for n in pargraph.graph.toposort([loss._node]) if n.value is None}
    with pargraph.trace() as tr:
        loss.backward()
        pargraph.compute()
    keys = {r.key for r in tr.nodes()}
    assert expected <= keys and any(r.phase == "backward" for r in tr.nodes())


def test_trace_reports_group_members_on_a_cluster(local_client):
    w = pargraph.ones(3, requires_grad=True)
    loss = ((w * 2).exp() + w).sum()
    expected = {n.key for n in pargraph.graph.toposort([loss._node]) if n.value is None}
    with dask.config.set(scheduler=local_client), pargraph.trace() as tr:
        loss.backward()
        pargraph.compute()
    assert expected <= {r.key for r in tr.nodes()}


def test_group_tasks_are_named_after_their_module_and_phase():
    from dask.utils import key_split

    from pargraph.engine.lowering import group_label

    model, computed = _towers_step()
    labels = {group_label(g) for g in partition(computed, Granularity(workers=2))}
    assert {f"{k}_forward" for k in range(4)} <= labels, labels
    assert {f"{k}_backward" for k in range(4)} <= labels, labels
    assert all(key_split(f"{label}-12t-abcd1234") == label for label in labels)


def test_bundled_branches_do_not_collapse_into_the_consumer_they_share():
    """16 small towers feed one loss: their bundles stay tasks of their own (merging them
    into the loss's group ran all 16 towers one after another in one task)."""
    model, computed = _towers_step(towers=16, width=64, batch=64)
    groups = partition(computed, Granularity(workers=2))
    assert _quotient_is_acyclic(groups)
    towers_per_group = [
        {n.scope.split(".")[0] for n in members if n.phase == "forward" and n.scope}
        for members in groups]
    assert max(len(t) for t in towers_per_group) <= 8
    assert sum(1 for t in towers_per_group if t) >= 2  # at least one per worker


def test_structure_caches_are_bounded_lru_and_shared_safely_between_threads():
    import threading

    from pargraph.graph import StructureCache

    cache = StructureCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "b" is now the least recently used
    cache.put("c", 3)
    assert cache.get("b") is None and cache.get("a") == 1 and cache.get("c") == 3
    assert (cache.hits, cache.misses) == (3, 1)
    # A hit keeps the key stored first: a step's key (a tuple per node) is not kept alive.
    stored, equal = tuple(["step", 1]), tuple(["step", 1])
    steps = StructureCache(2)
    steps.put(stored, 4)
    steps.put("other", 5)
    assert steps.get(equal) == 4 and list(steps.entries) == ["other", stored]
    assert list(steps.entries)[-1] is stored

    shared = StructureCache(8)

    def churn(offset):
        for k in range(2000):
            key = (offset + k) % 13
            if shared.get(key) is None:
                shared.put(key, key)

    threads = [threading.Thread(target=churn, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(shared.entries) <= 8 and shared.hits + shared.misses == 8000


def test_the_adaptive_threads_mode_runs_group_tasks_on_pargraphs_threads(monkeypatch):
    """Chosen "threads", a run's group tasks run on two threads (this one and a pool's), not
    through dask's scheduler, with BLAS limited to one thread, and give the same bits as the
    same tasks in one thread and on dask's threaded scheduler (both with one BLAS thread).
    pargraph's own ways build no dask task objects: only dask's scheduler gets a graph."""
    from dask.callbacks import Callback

    from pargraph import ops
    from pargraph.engine import lowering

    built, dask_graph = [], lowering._dask_graph

    def building(graph, calls):
        built.append(len(calls))
        return dask_graph(graph, calls)

    monkeypatch.setattr(lowering, "_dask_graph", building)

    through_dask, blas, relu = [], [], ops.REGISTRY["relu"]
    forward = relu.forward

    def recording(*args, **kwargs):
        blas.append(_blas_threads())
        return forward(*args, **kwargs)

    monkeypatch.setattr(relu, "forward", recording)

    on_threads, run_on_threads = [], modes.run_on_threads

    def counted(graph, keys, threads, parts=None):
        on_threads.append(threads)
        return run_on_threads(graph, keys, threads, parts)

    monkeypatch.setattr(modes, "run_on_threads", counted)
    results = {}
    for mode, adaptive in (("threads", True), ("inline, one BLAS thread", True),
                           ("threads", False)):
        blas.clear()
        through_dask.clear()
        on_threads.clear()
        built.clear()
        with Callback(pretask=lambda key, dsk, state: through_dask.append(key)), \
                dask.config.set({"scheduler": "threads", "num_workers": 2,
                                 "pargraph.adaptive": mode if adaptive else False,
                                 "pargraph.single-task-below": 0}), pargraph.trace() as tr:
            model, _ = _towers_step(towers=4, width=64, batch=64)
            pargraph.compute()
        results[mode, adaptive] = [p.grad.numpy() for p in model.parameters()]
        lanes = {r.lane for r in tr.nodes()}
        if adaptive:
            # The mode is what the test asserts; how many of the two lanes took a task
            # depends on whether the pool's thread woke before this one drained the tasks.
            assert not through_dask and not built
            if mode == "threads":
                assert on_threads and set(on_threads) == {2}, on_threads
            else:
                assert not on_threads and len(lanes) == 1, (on_threads, lanes)
        else:
            assert through_dask and built  # pargraph.adaptive: False: dask's threaded scheduler
        assert set(blas) == {1}
    for mode in (("inline, one BLAS thread", True), ("threads", False)):
        for a, b in zip(results["threads", True], results[mode]):
            np.testing.assert_array_equal(a, b)


def test_run_on_threads_runs_each_task_after_its_inputs_and_frees_what_was_read():
    """A graph wider than the threads and deep: every task sees its inputs' values; a value
    no later task reads is dropped (weakly held arrays die) unless it is asked for."""
    import weakref

    from dask.task_spec import Task, TaskRef

    from pargraph.engine.threads import run_on_threads

    alive = []

    def make(*inputs):
        value = np.array([sum(float(v[0]) for v in inputs) + 1.0])
        alive.append(weakref.ref(value))
        return value

    graph = {f"a{k}": Task(f"a{k}", make) for k in range(6)}
    for level in range(1, 5):
        for k in range(6):
            reads = [TaskRef(f"{'a' if level == 1 else f'l{level - 1}-'}{j}") for j in (k, 5 - k)]
            graph[f"l{level}-{k}"] = Task(f"l{level}-{k}", make, *reads)
    keys = [f"l4-{k}" for k in range(6)] + ["a0"]
    expected = dask.get(graph, keys)
    alive.clear()
    got = run_on_threads(graph, keys, threads=3)
    assert [float(v[0]) for v in got] == [float(v[0]) for v in expected]
    assert sum(ref() is not None for ref in alive) == len(keys)


def test_an_element_of_a_tuple_goes_after_its_own_last_reader():
    """A task's tuple holding a big value and a value read later: the big one goes once its
    readers ran (``Lowered.parts``), on threads and in one thread, while the tuple is kept for
    the other; a tuple the run returns, for one element, loses the other once it is read."""
    from dask.task_spec import Task

    from pargraph.engine.threads import run_on_threads
    from pargraph.runtime import Lowered

    def pair():
        return np.ones(1000), np.arange(3.0)

    def total(values, element):
        return float(values[element].sum())

    def seen(values, *_):
        return [value is None for value in values]

    graph = {"a": Task("a", pair),
             "b": Task("b", total, TaskRef("a"), 0),
             "c": Task("c", total, TaskRef("a"), 0),
             "d": Task("d", seen, TaskRef("a"), TaskRef("b"), TaskRef("c")),
             "e": Task("e", pair),
             "f": Task("f", total, TaskRef("e"), 1),
             "g": Task("g", seen, TaskRef("e"), TaskRef("f"))}
    keys = ["b", "c", "d", "e", "g"]
    parts = {"b": [("a", 0)], "c": [("a", 0)], "f": [("e", 1)]}
    expected = [1000.0, 1000.0, [True, False], None, [False, True]]
    for _ in range(20):  # b and c race on two threads: the second to end drops it
        got = run_on_threads(graph, keys, threads=2, parts=parts)
        assert got[:3] + [None] + got[4:] == expected
        assert got[3][0] is not None and got[3][1] is None
    sequential = [("a", [], []), ("b", [], []), ("c", [], [("a", 0)]), ("d", ["a"], []),
                  ("e", [], []), ("f", [], [("e", 1)]), ("g", ["f"], [])]
    lowered = Lowered(graph, keys, sequential=sequential, parts=parts,
                      listed=frozenset({"a", "e"}), calls=graph)
    got = modes.run_in_order(lowered, keys)
    assert got[:3] + [None] + got[4:] == expected
    assert got[3][0] is not None and got[3][1] is None


def test_run_on_threads_raises_the_first_error_as_itself_and_stops():
    from dask.task_spec import Task, TaskRef

    from pargraph.engine.threads import run_on_threads

    ran = []

    def fail():
        raise ZeroDivisionError("boom")

    def after(*_):
        ran.append(1)

    graph = {"bad": Task("bad", fail), "next": Task("next", after, TaskRef("bad"))}
    graph.update({f"ok{k}": Task(f"ok{k}", lambda: 1) for k in range(5)})
    with pytest.raises(ZeroDivisionError, match="boom"):
        run_on_threads(graph, list(graph), threads=2)
    assert not ran


def test_a_failing_op_on_pargraphs_threads_names_the_op_and_loses_nothing():
    pargraph.manual_seed(0)
    model = nn.ModuleList(nn.Linear(8, 3) for _ in range(4))
    opt = pargraph.optim.SGD(model.parameters(), lr=0.1)
    x = pargraph.randn(16, 8)
    before = [p.detach().numpy().copy() for p in model.parameters()]
    with dask.config.set({"scheduler": "threads", "pargraph.single-task-below": 0,
                          "pargraph.adaptive": "threads"}):
        loss = nn.functional.cross_entropy(pargraph.stack([m(x) for m in model]).mean(0),
                                           pargraph.zeros(16, dtype=pargraph.int64) + 7)
        loss.backward()
        with pytest.raises(IndexError, match="Target 7 is out of bounds") as raised:
            opt.step()
    assert "recorded at" in str(raised.value) and "test_partition.py" in str(raised.value)
    for p, old in zip(model.parameters(), before):
        np.testing.assert_array_equal(p.detach().numpy(), old)


def test_run_on_threads_called_from_inside_one_of_its_tasks_does_not_wait_for_itself():
    from dask.task_spec import Task

    from pargraph.engine.threads import run_on_threads

    def nested(k):
        return run_on_threads({"x": Task("x", lambda: k)}, ["x"], threads=2)[0]

    graph = {f"t{k}": Task(f"t{k}", nested, k) for k in range(4)}
    assert run_on_threads(graph, list(graph), threads=2) == [0, 1, 2, 3]


def test_a_ten_thousand_wide_fan_in_realizes_and_backpropagates():
    # Near-linear in the fan-in's width: a merge rewriting every group's ancestors, or an
    # in-place check or vjp call taking all of the stack's inputs for each of them, would
    # make it quadratic. The benchmarks' scaling workload times up to 20,000 branches.
    PlanCache.clear()
    x = pargraph.tensor(np.linspace(0.1, 1.0, 4), requires_grad=True)
    branches = 10_000
    total = pargraph.stack([(x * (k % 7 + 1)).sum() for k in range(branches)]).sum()
    coefficients = sum(k % 7 + 1 for k in range(branches))
    assert total.item() == pytest.approx(coefficients * np.linspace(0.1, 1.0, 4).sum())
    total.backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(4, coefficients))
