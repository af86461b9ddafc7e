"""Several threads training their own models at once get exactly the sequential results, and
a thread reading a model while another trains it reads values the model really had; pargraph's
helper threads (``pargraph.engine.threads``) run each task after its inputs, wake no more threads
than tasks are ready, keep nothing of a finished run, and follow PyTorch's thread counts."""

import functools
import operator
import threading

import numpy as np
import pytest

import pargraph
from pargraph import nn, optim
from pargraph.optim import lr_scheduler

STEPS, THREADS = 100, 8


class Towers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.towers = nn.ModuleList(
            nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3)) for _ in range(4))

    def forward(self, x):
        return pargraph.stack([tower(x) for tower in self.towers]).mean(0)


def _setup(kind: int):
    """Model k of the stress test: BatchNorm with Adam, DataParallel towers with SGD and
    momentum, or an MLP with AdamW and a learning-rate schedule."""
    pargraph.manual_seed(kind)
    scheduler = None
    if kind % 3 == 0:
        model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 3))
        opt = optim.Adam(model.parameters(), lr=1e-2)
    elif kind % 3 == 1:
        model = nn.DataParallel(Towers(), shards=2)
        opt = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    else:
        model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 3))
        opt = optim.AdamW(model.parameters(), lr=1e-2)
        scheduler = lr_scheduler.StepLR(opt, step_size=20, gamma=0.5)
    return model, opt, scheduler


def _data(seed: int = 0):
    # Computed, not yet realized, and shared by every thread: each thread's first run reads
    # a node another thread's run may be realizing.
    pargraph.manual_seed(seed)
    x = pargraph.randn(64, 8) * 2 + 1
    return x, (x.sum(1) > 8).long() + (x[:, 0] > 1).long()


def _train(setup, x, y, record=None):
    model, opt, scheduler = setup
    for step in range(STEPS):
        rows = slice(step % 4 * 16, (step % 4 + 1) * 16)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x[rows]), y[rows])
        loss.backward()
        opt.step()
        if scheduler is not None:
            scheduler.step()
        if record is not None:
            record.append({k: v.numpy().copy() for k, v in model.state_dict().items()})
    return {k: v.numpy().copy() for k, v in model.state_dict().items()}


def test_eight_threads_training_their_own_models_equal_the_sequential_run():
    import dask

    with dask.config.set(scheduler="threads"):
        x, y = _data()
        expected = [_train(_setup(k), x, y) for k in range(THREADS)]
        x, y = _data()
        setups = [_setup(k) for k in range(THREADS)]
        results: dict = {}
        errors: list = []

        def run(k):
            try:
                results[k] = _train(setups[k], x, y)
            except BaseException as error:  # reported below, with its thread
                errors.append((k, error))

        threads = [threading.Thread(target=run, args=(k,)) for k in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert not errors, errors
    for k in range(THREADS):
        assert results[k].keys() == expected[k].keys()
        for name in expected[k]:
            np.testing.assert_array_equal(results[k][name], expected[k][name], err_msg=name)


def test_a_reader_thread_sees_only_values_the_model_had():
    x, y = _data(1)
    history: list = []
    _train(_setup(0), x, y, record=history)  # BatchNorm and Adam: parameters and buffers
    seen = {name: {a.tobytes() for a in (state[name] for state in history)}
            for name in history[0]}
    x, y = _data(1)
    setup = _setup(0)
    for name, value in setup[0].state_dict().items():
        seen[name].add(value.numpy().tobytes())  # the initial values
    done = threading.Event()
    reads: list = []
    errors: list = []

    def read():
        try:
            while not done.is_set():
                reads.append({k: v.numpy().copy() for k, v in setup[0].state_dict().items()})
                for buffer in setup[0].buffers():
                    buffer.numpy()
        except BaseException as error:  # reported below: a dead reader must fail the test
            errors.append(error)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        _train(setup, x, y)
    finally:
        done.set()
        reader.join()
    assert not errors, errors
    assert len(reads) > 10
    for state in reads:
        for name, value in state.items():
            assert value.tobytes() in seen[name], name


def test_a_running_statistic_moves_to_its_new_value_in_one_step(monkeypatch):
    # Updated by a mul_ then an add_, a buffer read by another thread between the two holds
    # 0.9 times the old value, which the module never had (what the test above catches now
    # and then): each statistic must be rebound once, to its new value.
    bn = nn.BatchNorm1d(3)
    bn.running_mean.fill_(1.0)
    x = pargraph.randn(8, 3)
    seen: dict = {"running_mean": [], "running_var": []}
    original = pargraph.Tensor._rebind

    def rebind(self, node):
        result = original(self, node)
        for name, values in seen.items():
            if self is getattr(bn, name):
                values.append(self.numpy().copy())
        return result

    monkeypatch.setattr(pargraph.Tensor, "_rebind", rebind)
    bn(x)
    mean, var = x.numpy().mean(0), x.numpy().var(0, ddof=1)
    assert len(seen["running_mean"]) == 1 and len(seen["running_var"]) == 1
    np.testing.assert_allclose(seen["running_mean"][0], 0.9 + 0.1 * mean, rtol=1e-6)
    np.testing.assert_allclose(seen["running_var"][0], 0.9 + 0.1 * var, rtol=1e-6)


def test_a_target_another_thread_realizes_while_this_one_plans_is_not_run_again(monkeypatch):
    # Thread B realizing the target after thread A's plan listed it, before A kept the nodes
    # it computes: A's plan held the target's inputs but not the target, and A lowered a run
    # with no output (an IndexError when three threads read one tensor at once).
    from pargraph.engine import execution

    x = pargraph.randn(3, 4)
    y = ((x * 2).tanh() + 1).relu()
    expected = np.maximum(np.tanh(x.numpy() * 2) + 1, 0)
    original = execution.plan

    def planning(targets):
        order, computed = original(targets)
        if y._node in computed:  # "thread B" realizes the target now
            y._node.realize(expected, keep_inputs=False)
        return order, [node for node in computed if node.value is None]

    monkeypatch.setattr(execution, "plan", planning)
    np.testing.assert_array_equal(y.numpy(), expected)


def test_a_node_another_thread_realizes_while_this_one_plans_is_planned_again(monkeypatch):
    # Thread B realizing (and cutting the inputs of) a node thread A is planning must not
    # leave A with a plan that reads no inputs for it, let alone cache that plan: every later
    # run of the structure would call the op without arguments.
    from pargraph.engine import lowering

    a, b = pargraph.randn(3, 4), pargraph.randn(3, 4)
    shared = (a + b) * 2
    other = (a + b) * 2  # the same structure, realized "by the other thread" mid-plan
    original = lowering.SinglePlan.__init__
    hits = []

    def planning(self, order, computed, outputs, workers=1):
        if not hits:
            hits.append(1)
            for node in computed:
                node.realize(np.zeros(node.shape, node.dtype), keep_inputs=False)
        original(self, order, computed, outputs, workers)

    monkeypatch.setattr(lowering.SinglePlan, "__init__", planning)
    lowering.PlanCache.clear()
    assert np.array_equal(shared.numpy(), np.zeros((3, 4), np.float32))
    monkeypatch.undo()
    expected = (a.numpy() + b.numpy()) * 2
    np.testing.assert_array_equal(other.numpy(), expected)  # the cached plan is sound


def test_reading_a_tensor_another_thread_rebinds_meanwhile_reads_one_value(monkeypatch):
    # A detached tensor (what state_dict() returns) reads its base's node at every access:
    # A detached tensor reads its base's node at every access: numpy() must fetch the node
    # it realized, even when an optimizer step in another thread rebinds the base between.
    from pargraph.engine import execution

    p = nn.Parameter(pargraph.tensor([1.0, 2.0]) * 1)
    detached = p.detach()
    realize = execution.realize
    stepped = []

    def realize_then_step(nodes, *args, **kwargs):
        realize(nodes, *args, **kwargs)
        if not stepped:
            stepped.append(1)
            with pargraph.no_grad():
                p.add_(1.0)  # the other thread's step, between the run and the fetch

    monkeypatch.setattr(execution, "realize", realize_then_step)
    assert detached.numpy().tolist() == [1.0, 2.0]
    assert detached.numpy().tolist() == [2.0, 3.0]


def test_a_planned_run_reads_its_inputs_values_when_it_is_planned():
    # Another thread's commit may free a saved value between this run's plan and its start
    # (a running statistic read while the backward frees the batch mean): the run computes
    # from the values it planned with, inline or as a graph.
    import dask

    from pargraph.engine import lowering, modes

    a = pargraph.ones(3) * 2
    a.numpy()
    b = a + 1
    order, computed = lowering.plan([b._node])
    lowered = lowering.lower(order, computed, [b._node])
    a._node.value = None  # freed meanwhile
    assert modes.run_inline(lowered)[0].tolist() == [3.0, 3.0, 3.0]
    assert dask.get(lowered.graph, lowered.keys)[0].tolist() == [3.0, 3.0, 3.0]


def test_threads_plan_and_commit_their_runs_one_at_a_time(monkeypatch):
    from pargraph.engine import execution

    planning, go = threading.Event(), threading.Event()
    original = execution.plan

    def slow_plan(targets):
        if threading.current_thread().name == "planner":
            planning.set()
            go.wait(10)
        return original(targets)

    monkeypatch.setattr(execution, "plan", slow_plan)
    first, second = pargraph.ones(3) + 1, pargraph.ones(3) + 2
    planner = threading.Thread(target=first.numpy, name="planner")
    other = threading.Thread(target=second.numpy)
    planner.start()
    assert planning.wait(10)
    other.start()
    other.join(0.3)
    assert other.is_alive()  # its plan and commit wait for the planner's plan
    go.set()
    planner.join(10)
    other.join(10)
    assert first.tolist() == [2.0, 2.0, 2.0] and second.tolist() == [3.0, 3.0, 3.0]


# --- pargraph's helper threads ------------------------------------------------------------------


def _named_tasks(count: int, chained: bool, seconds: float = 0.0):
    """``count`` tasks, each recording the thread it ran in; each reads the one before if
    ``chained``."""
    import time

    from dask.task_spec import Task, TaskRef

    ran_in = []

    def task(k, *_):
        ran_in.append(threading.current_thread().name)
        time.sleep(seconds)
        return k

    graph = {f"t{k}": Task(f"t{k}", task, k, *([TaskRef(f"t{k - 1}")] if chained and k else []))
             for k in range(count)}
    return graph, ran_in


def test_a_chain_runs_in_the_calling_thread_and_wakes_no_helper():
    from pargraph.engine.threads import run_on_threads

    graph, ran_in = _named_tasks(30, chained=True)
    assert run_on_threads(graph, ["t29"], threads=8) == [29]
    # Each task readies one: the thread that ran the last goes on with it, no helper waits.
    assert set(ran_in) == {threading.current_thread().name}


def test_one_thread_is_the_calling_thread_alone():
    from dask.task_spec import Task, TaskRef

    from pargraph.engine.threads import run_on_threads

    graph, ran_in = _named_tasks(4, chained=False, seconds=0.01)
    run_on_threads(graph, list(graph), threads=2)  # a helper exists
    # A task whose end readies four: none of them goes to a helper.
    graph = {"root": Task("root", lambda: 0),
             **{key: Task(key, task.func, *task.args, TaskRef("root"))
                for key, task in graph.items()}}
    ran_in.clear()
    assert run_on_threads(graph, ["t0", "t1", "t2", "t3"], threads=1) == [0, 1, 2, 3]
    assert set(ran_in) == {threading.current_thread().name}


def test_runs_from_two_threads_share_the_helpers_and_each_gets_its_own_values():
    from pargraph.engine.threads import run_on_threads

    results = {}

    def run(name):
        graph, _ = _named_tasks(12, chained=False, seconds=0.01)
        results[name] = run_on_threads(graph, list(graph), threads=4)

    callers = [threading.Thread(target=run, args=(k,)) for k in range(2)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join(10)
    assert results[0] == results[1] == list(range(12))


def test_a_forked_child_runs_on_helper_threads_of_its_own():
    import multiprocessing

    from pargraph.engine.threads import run_on_threads

    graph, ran_in = _named_tasks(4, chained=False, seconds=0.05)
    run_on_threads(graph, list(graph), threads=2)  # the parent's helpers exist
    assert len(set(ran_in)) == 2
    with multiprocessing.get_context("fork").Pool(1) as pool:
        threads = pool.apply_async(_threads_a_run_takes, (4,)).get(timeout=30)
    assert threads == 2  # the child's own helper took tasks, the parent's do not exist there


def _threads_a_run_takes(tasks: int) -> int:
    from pargraph.engine.threads import run_on_threads

    graph, ran_in = _named_tasks(tasks, chained=False, seconds=0.05)
    run_on_threads(graph, list(graph), threads=2)
    return len(set(ran_in))


def test_no_helper_keeps_a_finished_runs_values():
    import weakref

    from dask.task_spec import Task, TaskRef

    from pargraph.engine.threads import run_on_threads

    made = []

    def make(*_):
        value = np.ones(1000)
        made.append(weakref.ref(value))
        return value

    graph = {f"a{k}": Task(f"a{k}", make) for k in range(8)}
    graph.update({f"b{k}": Task(f"b{k}", make, TaskRef(f"a{k}")) for k in range(8)})
    results = run_on_threads(graph, [f"b{k}" for k in range(8)], threads=4)
    assert len(made) == 16
    del results
    # The helpers wait for the next run holding nothing of this one (its values, its tasks).
    assert [ref for ref in made if ref() is not None] == []


def test_random_graphs_from_three_threads_at_once_give_the_sync_schedulers_values():
    """Random graphs (some tasks sleep, some fail, some run a graph of their own on the same
    helpers) run by three threads at once, on 1 to 16 threads each: every value is what
    dask's sync scheduler gives, and a failure is raised as itself."""
    import random
    import time

    import dask
    from dask.task_spec import Task, TaskRef

    from pargraph.engine.threads import run_on_threads

    class Boom(Exception):
        pass

    def task(*args, k, fail, sleep, nested):
        if sleep:
            time.sleep(0.0005)
        if nested:
            inner = {"a": Task("a", int, 1), "b": Task("b", operator.neg, TaskRef("a"))}
            assert run_on_threads(inner, ["b", "a"], nested) == [-1, 1]
        if fail:
            raise Boom(k)
        return k + sum(args)

    def check(seed):
        rng = random.Random(seed)
        n = rng.randint(1, 40)
        fail = rng.randrange(n) if rng.random() < 0.2 else None
        graph = {}
        for k in range(n):
            reads = rng.sample(range(k), min(k, rng.randint(0, 3)))
            graph[f"t{k}"] = Task(f"t{k}", functools.partial(
                task, k=k, fail=k == fail, sleep=rng.random() < 0.2,
                nested=rng.choice([1, 2, 16]) if rng.random() < 0.1 else 0),
                *[TaskRef(f"t{j}") for j in reads])
        keys = rng.sample(list(graph), rng.randint(1, n))
        threads = rng.choice([1, 2, 3, 8, 16])
        if fail is not None:
            with pytest.raises(Boom):
                run_on_threads(graph, keys, threads)
        else:
            assert run_on_threads(graph, keys, threads) == list(dask.get(graph, keys))

    failures = []

    def caller(first):
        try:
            for seed in range(first, first + 70):
                check(seed)
        except BaseException as error:  # noqa: BLE001 (reported below, in the test's thread)
            failures.append(error)

    callers = [threading.Thread(target=caller, args=(k * 1000,)) for k in range(3)]
    for thread in callers:
        thread.start()
    for thread in callers:
        thread.join(60)
    assert not any(thread.is_alive() for thread in callers) and failures == []


# --- PyTorch's thread counts ------------------------------------------------------------------


def _blas_threads() -> set:
    import threadpoolctl

    # MKL's sequential kernels (pargraph[mkl]) have no threads to set
    return {info["num_threads"] for info in threadpoolctl.threadpool_info()
            if info["user_api"] == "blas" and info.get("threading_layer") != "sequential"}


def test_set_num_threads_sets_how_many_ops_run_at_once_and_blas_threads():
    import time

    import dask
    import threadpoolctl

    @pargraph.library.custom_op("threads_test::nap", mutates_args=(), cost=0.02)
    def nap(x):
        time.sleep(0.02)
        return x + 1

    nap.register_fake(lambda x: pargraph.empty_like(x))

    def lanes_of_four_naps():
        with pargraph.trace() as traced:
            pargraph.stack([nap(pargraph.ones(3) * k) for k in range(4)]).sum().item()
        return {record.lane for record in traced.records.values() if record.lane}

    model = Towers()
    opt = optim.SGD(model.parameters(), lr=0.1)
    x, y = _data()
    with dask.config.set({"num_workers": None, "scheduler": "threads",
                          "pargraph.adaptive": "threads"}), \
            threadpoolctl.threadpool_limits(limits=None, user_api="blas"):
        pargraph.set_num_threads(1)  # a PyTorch program's first line
        assert pargraph.get_num_threads() == 1 == dask.config.get("num_workers")
        assert _blas_threads() == {1}
        assert len(lanes_of_four_naps()) == 1
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        assert np.isfinite(model.towers[0][0].weight.detach().numpy()).all()
        pargraph.set_num_threads(2)
        assert _blas_threads() == {2} and len(lanes_of_four_naps()) == 2
        pargraph.set_num_interop_threads(4)  # ops side by side; BLAS left as it is
        assert pargraph.get_num_interop_threads() == pargraph.get_num_threads() == 4
        assert _blas_threads() == {2} and len(lanes_of_four_naps()) == 4


def test_thread_counts_refuse_what_pytorch_refuses_with_its_messages():
    import dask
    import threadpoolctl

    torch = pytest.importorskip("torch")
    with dask.config.set(num_workers=None), \
            threadpoolctl.threadpool_limits(limits=None, user_api="blas"):
        for name in ("set_num_threads", "set_num_interop_threads"):
            for value in (0, -2, 2.5, "2", True, None):
                with pytest.raises(RuntimeError) as theirs:
                    getattr(torch, name)(value)
                with pytest.raises(RuntimeError) as ours:
                    getattr(pargraph, name)(value)
                assert str(ours.value) == str(theirs.value), (name, value)
        pargraph.set_num_threads(np.int64(2))  # an integer of any kind, as torch takes
        assert pargraph.get_num_threads() == 2
