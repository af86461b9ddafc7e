"""Execution on dask: one shared suite on every scheduler, concurrency, names, errors, scale."""

import concurrent.futures
import os
import subprocess
import sys
import threading
import time
import traceback

import dask
import numpy as np
import pytest
from dask.callbacks import Callback
from dask.utils import key_split

import pargraph
from pargraph import ops, runtime
from pargraph.engine import lowering, modes, threads
from tests.op_table import CASES, tensors_of


def mlp_step(seed: int = 0):
    """Forward and backward of a two-layer network with a shared input (a fan-in point)."""
    rng = np.random.default_rng(seed)
    x = pargraph.tensor(rng.standard_normal((8, 5)))
    w1 = pargraph.tensor(rng.standard_normal((5, 6)), requires_grad=True)
    w2 = pargraph.tensor(rng.standard_normal((6, 3)), requires_grad=True)
    hidden = (x @ w1).tanh()
    logits = hidden @ w2 + hidden[:, :3]  # hidden feeds two consumers
    loss = -logits.log_softmax(1)[:, 0].mean()
    loss.backward()
    return loss.item(), w1.grad.numpy(), w2.grad.numpy(), (x, w1, w2)


def numpy_mlp_step(x, w1, w2):
    hidden = np.tanh(x @ w1)
    logits = hidden @ w2 + hidden[:, :3]
    shifted = logits - logits.max(1, keepdims=True)
    probs = np.exp(shifted) / np.exp(shifted).sum(1, keepdims=True)
    loss = -(shifted[:, 0] - np.log(np.exp(shifted).sum(1))).mean()
    g_logits = probs.copy()
    g_logits[:, 0] -= 1
    g_logits /= len(x)
    g_hidden = g_logits @ w2.T
    g_hidden[:, :3] += g_logits
    g_w2 = hidden.T @ g_logits
    g_w1 = x.T @ (g_hidden * (1 - hidden ** 2))
    return loss, g_w1, g_w2


# --- the shared suite: every scheduler must pass it ------------------------------------------

def test_training_step_matches_numpy(scheduler):
    loss, g1, g2, (x, w1, w2) = mlp_step()
    ref_loss, ref_g1, ref_g2 = numpy_mlp_step(x.numpy(), w1.detach().numpy(), w2.detach().numpy())
    assert loss == pytest.approx(ref_loss, rel=1e-12)
    np.testing.assert_allclose(g1, ref_g1, rtol=1e-10)
    np.testing.assert_allclose(g2, ref_g2, rtol=1e-10)


def test_results_are_identical_on_every_scheduler(scheduler):
    loss, g1, g2, _ = mlp_step(seed=3)
    with dask.config.set(scheduler="sync"):
        ref_loss, ref_g1, ref_g2, _ = mlp_step(seed=3)
    assert loss == ref_loss
    np.testing.assert_array_equal(g1, ref_g1)
    np.testing.assert_array_equal(g2, ref_g2)


@pytest.mark.parametrize("name", ["matmul_broadcast", "softmax", "index_tensor", "max_dim",
                                  "cat", "where", "prod_zero"])
def test_ops_forward_and_backward_on_every_scheduler(scheduler, name):
    case = next(c for c in CASES if c.name == name)
    inputs = tensors_of(case, requires_grad=True)
    out = case.fn(*inputs)
    np.testing.assert_allclose(out.detach().numpy(), case.ref(*case.inputs), rtol=1e-10)
    assert pargraph.autograd.gradcheck(case.fn, inputs)


def test_second_backward_error_on_every_scheduler(scheduler):
    x = pargraph.ones(2, requires_grad=True)
    loss = (x.exp() * 2).sum()
    loss.backward()
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        loss.backward()


def test_task_errors_on_every_scheduler(scheduler):
    x = pargraph.ones(3)
    bad = x[pargraph.tensor([0, 7])]; line = sys._getframe().f_lineno  # noqa: E702
    with pytest.raises(IndexError) as excinfo:
        bad.numpy()
    message = str(excinfo.value)
    assert message.startswith("index: ") and "out of bounds" in message
    assert f'{__file__}", line {line}' in message


def test_compute_realizes_several_tensors_in_one_run(scheduler, record_runs):
    runs = record_runs
    a = pargraph.arange(4.0) * 2
    b = a + 1
    c = a.sum()
    pargraph.compute(b, c)
    assert len(runs) == 1
    assert b.tolist() == [1.0, 3.0, 5.0, 7.0] and c.item() == 12.0
    assert len(runs) == 1  # the values were kept: reading them ran nothing


# --- scheduling -----------------------------------------------------------------------------------

def _record_matmul_intervals(monkeypatch):
    intervals = []
    forward = ops.matmul.forward

    def recording(x, y):
        start = time.perf_counter()
        out = forward(x, y)
        intervals.append((start, time.perf_counter(), threading.get_ident()))
        return out

    monkeypatch.setattr(ops.matmul, "forward", recording)
    return intervals


def _two_branches(size: int = 160, products: int = 64):
    """Two chains of products: of 160 x 160 matrices (a run of them limits BLAS to one thread,
    modes.BlasThreads), 64 of them a branch (~10 ms), so that a thread that starts a few ms
    late on a busy machine still overlaps the other."""
    rng = np.random.default_rng(0)
    a = pargraph.tensor(rng.standard_normal((size, size)))
    b = pargraph.tensor(rng.standard_normal((size, size)))
    left, right = a, b
    for _ in range(products):  # matmul releases the GIL: these branches can run at once
        left = (left @ a).tanh()
        right = (right @ b).tanh()
    return left, right


def _overlaps(intervals):
    return sum(
        1 for i, (s1, e1, _) in enumerate(intervals) for s2, e2, _ in intervals[i + 1:]
        if s1 < e2 and s2 < e1
    )


def test_independent_branches_overlap_on_threads_not_on_sync(monkeypatch):
    intervals = _record_matmul_intervals(monkeypatch)
    with dask.config.set(scheduler="sync"):
        pargraph.compute(*_two_branches())
    assert len(intervals) == 128 and _overlaps(intervals) == 0
    intervals.clear()
    with dask.config.set(scheduler="threads", num_workers=2):
        pargraph.compute(*_two_branches())
    assert len(intervals) == 128
    assert len({thread for *_, thread in intervals}) == 2
    assert _overlaps(intervals) >= 1


def _blas_threads_of_products(monkeypatch):
    """A list that gets BLAS's thread counts each time a matrix product runs."""
    from threadpoolctl import threadpool_info

    seen = []
    forward = ops.matmul.forward

    def recording(x, y):
        seen.append([i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"])
        return forward(x, y)

    monkeypatch.setattr(ops.matmul, "forward", recording)
    return seen


def test_a_run_with_big_products_keeps_all_of_blas_threads(monkeypatch):
    """A float32 product's bits depend on BLAS's threads (not on what runs beside it): a run
    with a big one, narrower than its threads (two branches on three), keeps them all, on
    whichever thread runs its products, and its branches still run side by side; its values
    are those of the run in one thread."""
    from threadpoolctl import threadpool_info

    threads_seen = _blas_threads_of_products(monkeypatch)
    ops.gemm.blas.functions()  # MKL, where installed, loads at a run's first product
    outside = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    with dask.config.set(scheduler="threads", num_workers=3,
                         **{"pargraph.single-task-below": 0}):
        left, right = pargraph.compute(*_two_branches(size=300, products=3))
    assert threads_seen == [outside] * 6
    with dask.config.set({"scheduler": "threads", "pargraph.adaptive": "inline"}):
        in_one = pargraph.compute(*_two_branches(size=300, products=3))
    for a, b in zip((left, right), in_one):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_a_wide_run_of_big_products_runs_its_branches_on_one_blas_thread_each(monkeypatch):
    """Towers of big products, several times more than the run has threads, keep every
    thread busy side by side: such a run limits BLAS to one thread (by its shapes, whichever
    way it goes), and its values are those of the same run on one BLAS thread, as does a
    graph just as wide as the threads (two branches on two). A chain of the same products,
    or two branches on three threads, keeps all of BLAS's threads."""
    from threadpoolctl import threadpool_limits

    def towers(n):
        rng = np.random.default_rng(1)
        a = pargraph.tensor(rng.standard_normal((300, 300)))
        return [(a * (k + 1) @ a).tanh() @ a for k in range(n)]

    threads_seen = _blas_threads_of_products(monkeypatch)
    with dask.config.set(scheduler="threads", num_workers=2):
        wide = pargraph.compute(*towers(8))
    assert len(threads_seen) == 16 and all(n == [1] * len(n) for n in threads_seen)
    with dask.config.set(scheduler="sync"), threadpool_limits(1, "blas"):
        alone = pargraph.compute(*towers(8))
    for a, b in zip(wide, alone):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    with dask.config.set(scheduler="threads", num_workers=2):
        order, computed = lowering.plan([t._node for t in towers(8)])
        assert lowering.blas_threads_of(computed, 2) == runtime.ONE_BLAS
        assert lowering.blas_threads_of(computed, 16) == runtime.ALL_BLAS  # not wide enough
        order, computed = lowering.plan([t._node for t in towers(2)])
        assert lowering.blas_threads_of(computed, 2) == runtime.ONE_BLAS  # as wide as threads
        assert lowering.blas_threads_of(computed, 3) == runtime.ALL_BLAS
        chain = towers(1)[0]
        for _ in range(7):
            chain = (chain @ chain).tanh()
        assert lowering.blas_threads_of(lowering.plan([chain._node])[1], 2) == runtime.ALL_BLAS


def test_blas_is_limited_to_one_thread_during_threaded_runs(monkeypatch):
    from threadpoolctl import threadpool_info

    seen = []
    forward = ops.exp.forward
    monkeypatch.setattr(ops.exp, "forward", lambda x, out=None: seen.append(
        [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"])
        or forward(x, out=out))

    def two_branches():  # two groups that can run side by side: a run on dask's threads
        square = pargraph.ones(150, 150)  # products too small to keep BLAS's threads
        return ((square @ square).exp().sum() + (square @ square.T).exp().sum()).numpy()

    with dask.config.set(scheduler="threads"):
        two_branches()
    assert seen[-1] and all(n == 1 for n in seen[-1])
    outside = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    with dask.config.set({"scheduler": "threads", "pargraph.limit-blas": False}):
        two_branches()
    assert seen[-1] == outside
    with dask.config.set(scheduler="threads"):
        square = pargraph.ones(100, 100)
        (square @ square).exp().numpy()  # one task, in this thread: limited all the same
    assert seen[-1] and all(n == 1 for n in seen[-1])
    assert [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"] == outside


def test_a_run_whose_products_openblas_keeps_on_one_thread_leaves_blas_alone(monkeypatch):
    """OpenBLAS runs a product of m·n·k up to 262,144 (a matrix-vector one up to 8,192
    elements) on one thread whatever its count, so no count changes such a run's results: it
    leaves BLAS's threads as they are (setting them costs a small step ~5 us)."""
    from threadpoolctl import threadpool_info

    if not all(i["internal_api"] == "openblas" or i.get("threading_layer") == "sequential"
               for i in threadpool_info() if i["user_api"] == "blas"):  # (pargraph[mkl])
        pytest.skip("the rule is OpenBLAS's; other BLAS libraries are always limited")
    seen = []
    forward = ops.exp.forward
    monkeypatch.setattr(ops.exp, "forward", lambda x, out=None: seen.append(
        [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"])
        or forward(x, out=out))
    outside = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    with dask.config.set(scheduler="threads"):
        pargraph.ones(2).exp().numpy()  # no product at all
        assert seen[-1] == outside
        a, b = pargraph.ones(32, 64), pargraph.ones(64, 128)  # m·n·k 262,144
        (a @ b).exp().numpy()
        assert seen[-1] == outside
        (pargraph.ones(64, 64) @ b).exp().numpy()  # 524,288: OpenBLAS would split it
        assert seen[-1] and all(n == 1 for n in seen[-1])
        (pargraph.ones(1, 9000) @ pargraph.ones(9000, 1)).exp().numpy()  # a long dot
        assert seen[-1] and all(n == 1 for n in seen[-1])


def test_the_gil_switch_interval_is_lowered_during_threaded_runs_and_restored(monkeypatch):
    seen = []
    forward = ops.exp.forward
    monkeypatch.setattr(ops.exp, "forward", lambda x, out=None: seen.append(
        sys.getswitchinterval()) or forward(x, out=out))

    def two_branches():  # two groups that can run side by side: a run on dask's threads
        big = pargraph.ones(400, 400)
        return ((big @ big).exp().sum() + (big @ big.T).exp().sum()).numpy()

    def threaded(**settings):  # on threads each time (not the way found fastest)
        return dask.config.set({"scheduler": "threads", "pargraph.adaptive": "threads",
                                **{f"pargraph.{k.replace('_', '-')}": v
                                   for k, v in settings.items()}})

    before = sys.getswitchinterval()
    try:
        sys.setswitchinterval(0.004)
        with threaded():
            two_branches()
        assert seen[-2:] == pytest.approx([threads.SWITCH_INTERVAL] * 2)
        assert sys.getswitchinterval() == pytest.approx(0.004)
        with threaded(switch_interval=0.001):
            two_branches()
        assert seen[-2:] == pytest.approx([0.001] * 2)
        with threaded(switch_interval=None):
            two_branches()
        assert seen[-2:] == pytest.approx([0.004] * 2)
        sys.setswitchinterval(0.0001)  # the program's own, shorter: kept
        with threaded():
            two_branches()
        assert seen[-2:] == pytest.approx([0.0001] * 2, abs=2e-6)
        # Runs of two threads at once: the interval comes back when the last one ends.
        sys.setswitchinterval(0.004)
        with threaded(), concurrent.futures.ThreadPoolExecutor(2) as pool:
            for future in [pool.submit(two_branches) for _ in range(6)]:
                future.result()
        assert sys.getswitchinterval() == pytest.approx(0.004)
        assert seen[-12:] == pytest.approx([threads.SWITCH_INTERVAL] * 12)
    finally:
        sys.setswitchinterval(before)


def test_default_scheduler_is_threaded():
    with dask.config.set(scheduler=None):
        assert modes.choose_scheduler() is dask.threaded.get


def test_a_named_local_scheduler_is_dasks_own_and_imports_no_distributed():
    for name in [*dask.base.named_schedulers, "Threads"]:
        with dask.config.set(scheduler=name):
            assert modes.choose_scheduler() is dask.base.get_scheduler(scheduler=name)
    # dask's own lookup imports distributed to look for a Client (0.5 s on the first run)
    program = ("import sys, dask, pargraph\n"
               "with dask.config.set(scheduler='threads'):\n"
               "    x = pargraph.ones(200, 200, requires_grad=True)\n"
               "    ((x @ x).exp().sum() + (x @ x.T).sum()).backward()\n"
               "    assert x.grad.numpy().shape == (200, 200)\n"
               "print('distributed' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_values_are_computed_once(monkeypatch):
    calls = []
    forward = ops.sin.forward
    monkeypatch.setattr(ops.sin, "forward", lambda x: calls.append(1) or forward(x))
    y = pargraph.ones(3).sin()
    z = y * 2
    y.numpy()
    z.numpy()
    repr(y)
    assert len(calls) == 1


def test_forward_and_backward_run_as_one_graph(record_runs, unfused):
    runs = record_runs
    w = pargraph.ones(3, requires_grad=True)
    loss = (w.exp() * w).sum()
    loss.backward()
    w.grad.numpy()
    assert len(runs) == 1
    groups = {key_split(k) for k in runs[0]}
    assert {"exp", "mul", "sum", "mul_backward", "exp_backward", "accumulate_grad"} <= groups


def test_task_names_group_forward_backward_and_accumulation_apart(unfused):
    executed = []
    w = pargraph.randn(4, 3, requires_grad=True)
    x = pargraph.randn(5, 4)
    hidden = (x @ w).relu()
    loss = (hidden * hidden + hidden).sum()
    with Callback(pretask=lambda key, dsk, state: executed.append(key)):
        loss.backward()
        pargraph.compute()
    groups = {key_split(k) for k in executed}
    forward = {"matmul", "relu", "mul", "add", "sum"}
    # add's vjp passes g through unchanged, so it emits no node of its own.
    backward = {"matmul_backward", "relu_backward", "mul_backward", "sum_backward"}
    assert forward <= groups and backward <= groups and "accumulate_grad" in groups
    assert not forward & (groups - forward)


def test_errors_in_tasks_keep_their_type_and_hide_dask_frames():
    x = pargraph.arange(3)
    # An integer division by a zero in a tensor: known only when the task runs.
    bad = x // pargraph.tensor([1, 0, 1]); line = sys._getframe().f_lineno  # noqa: E702
    with pytest.raises(RuntimeError, match="^floor_divide: ZeroDivisionError") as excinfo:
        bad.tolist()
    assert f"line {line}" in str(excinfo.value)
    frames = traceback.extract_tb(excinfo.value.__traceback__)
    assert not any("dask" in frame.filename for frame in frames)


def test_long_chain_builds_runs_and_backpropagates_without_recursion():
    # 20 times Python's recursion limit deep (the scaling benchmark goes to 100,000 nodes).
    steps = 10 * sys.getrecursionlimit()
    x = pargraph.tensor(1.0, dtype=pargraph.float64, requires_grad=True)
    y = x
    for _ in range(steps):
        y = y * 1.00001
        y = y - 0.00001
    assert len(pargraph.graph.toposort([y._node])) == 2 * steps + 1
    with dask.config.set(scheduler="sync"):
        y.backward()
    assert y.item() == pytest.approx(1.0, rel=1e-6)
    assert x.grad.item() == pytest.approx(1.00001 ** steps, rel=1e-9)


# --- the dask collection protocol -----------------------------------------------------------------


class _CountsItsTokenizing:
    calls = 0

    def __dask_tokenize__(self):
        type(self).calls += 1
        return "counted"


def test_a_cluster_run_is_named_without_hashing_its_tasks():
    """Client.get hashes a dict graph to name it (~17 ms a training step, more with arrays
    in it); pargraph names its runs itself, and nothing in the graph is looked at."""
    from dask.task_spec import DataNode, Task, TaskRef

    from pargraph.remote.submit import untokenized as _untokenized

    graph = {"data": DataNode("data", _CountsItsTokenizing()),
             "task": Task("task", type, TaskRef("data"))}
    one_layer = _untokenized(graph)
    placed = _untokenized(graph, workers={"task": "tcp://127.0.0.1:1"}, keys=["task"])
    assert _CountsItsTokenizing.calls == 0
    assert one_layer._name != placed._name
    assert all("pargraph-" in expr._name for expr in (one_layer, placed))
    assert dict(one_layer.__dask_graph__()) == graph


def test_a_node_goes_through_named_states():
    from pargraph.graph import CUT, FREED, REALIZED, WAITING

    w = pargraph.ones(3, requires_grad=True)
    h = w * 2
    loss = h.sum()
    assert h._node.state == WAITING and w._node.state == CUT  # a leaf holds its value only
    loss.item()
    assert h._node.state == REALIZED  # a backward may still need its inputs
    loss.backward()
    assert h._node.state == FREED
    pargraph.compute()
    assert h._node.state == FREED and h.tolist() == [2.0, 2.0, 2.0]  # a tensor still holds it
    assert (h.detach() + 1)._node.state == WAITING


def test_connect_names_a_missing_port():
    for address in ("localhost", "tcp://127.0.0.1"):
        with pytest.raises(ValueError, match="names no port.*8786"):
            pargraph.connect(address, timeout=1)


@pytest.mark.parametrize("name", ["sync", "threads"])
def test_a_structure_run_again_and_again_reads_each_runs_numbers(name):
    # From its third run a one-task structure runs as generated straight-line code that
    # reads each run's literal arguments, attributes and dtypes from the run's own nodes.
    from pargraph.engine import lowering

    data = np.arange(6.0).reshape(2, 3) - 2
    with dask.config.set(scheduler=name):
        for k in range(8):
            dtype = pargraph.float32 if k < 6 else pargraph.float64
            x = pargraph.tensor(data, dtype=dtype)
            y = pargraph.nn.functional.leaky_relu(x * (k + 1), negative_slope=0.1 * k) - k
            scaled = data * (k + 1)
            expected = np.where(scaled > 0, scaled, scaled * 0.1 * k) - k
            np.testing.assert_allclose(y.numpy(), expected, rtol=1e-6)
            assert y.numpy().dtype == dtype
    plans = [p for p in lowering.PlanCache.entries.values()
             if isinstance(p, lowering.SinglePlan) and p.straight.functions is not None]
    assert plans  # the loop's structure ran as straight-line code


@pytest.mark.parametrize("name", ["sync", "threads"])
def test_group_tasks_of_a_structure_run_again_and_again_read_each_runs_numbers(name):
    from pargraph.engine import lowering

    branches = [np.full((4, 4), k + 1.0) for k in range(4)]
    with dask.config.set({"scheduler": name, "pargraph.single-task-below": 0,
                          "pargraph.task-grain": 0}):
        for k in range(6):
            tensors = [pargraph.tensor(b) for b in branches]
            total = pargraph.stack([(t * (k + 1)).exp().sum() + k for t in tensors]).sum()
            expected = sum(np.exp(b * (k + 1)).sum() + k for b in branches)
            np.testing.assert_allclose(total.item(), expected, rtol=1e-6)
    plans = [p for p in lowering.PlanCache.entries.values()
             if isinstance(p, lowering.GroupPlan) and p.straight.functions is not None]
    assert plans


@pytest.mark.parametrize("name", ["sync", "threads"])
def test_an_error_in_a_structures_straight_line_run_names_the_op_and_line(name):
    x = pargraph.ones(3)
    with dask.config.set(scheduler=name):
        for k in range(5):
            bad = x[pargraph.tensor([0, k])] * 2; line = sys._getframe().f_lineno  # noqa: E702
            if k < 3:
                bad.numpy()
        with pytest.raises(IndexError) as excinfo:
            bad.numpy()
    message = str(excinfo.value)
    assert "index" in message and "out of bounds" in message
    assert f'{__file__}", line {line}' in message


def test_a_trace_times_every_node_of_a_structure_run_many_times():
    x = pargraph.ones(3, 4)
    for _ in range(4):
        ((x * 2).exp() + 1).sum().item()
    with pargraph.trace() as trace:
        ((x * 2).exp() + 1).sum().item()
    assert sorted(record.op for record in trace.nodes()) == ["add", "exp", "mul", "sum"]


def test_products_that_leave_blas_alone_give_the_same_bits_on_any_blas_threads():
    """The rule ``blas_threads_of`` relies on, checked on this machine's BLAS: every product
    it lets run at any thread count gives the same float32 bits on one and two threads, and
    some product it limits does not (so the check can tell; how many depends on the kernels
    the BLAS runs: MKL's where installed, ``ops.gemm`` keeping it to the rule)."""
    import itertools

    from threadpoolctl import threadpool_limits

    from pargraph.engine import lowering
    from pargraph.ops.gemm import blas
    from pargraph.ops.gemm import product as blas_product

    if (os.cpu_count() or 1) < 2:
        pytest.skip("the rule is about two threads or more")
    rng = np.random.default_rng(0)
    sizes = [1, 3, 16, 31, 64, 100, 128, 256, 1024, 8192]
    any_count = differing = 0
    for m, n, k in itertools.product(sizes, sizes, sizes):
        if m * n * k > 2_000_000:
            continue
        x = pargraph.tensor(rng.standard_normal((m, k)).astype(np.float32))
        y = pargraph.tensor(rng.standard_normal((k, n)).astype(np.float32))
        product = (x @ y)._node
        results = []
        for count in (1, 2):
            with threadpool_limits(count, "blas"):
                results.append(blas_product(x.numpy(), y.numpy()))  # MKL's or numpy's
        same = np.array_equal(*results)
        if lowering.blas_threads_of([product]) == runtime.ANY_BLAS:
            any_count += 1
            assert same, (m, n, k)
        else:
            differing += not same
    # MKL's sequential kernels (pargraph[mkl]) run what one thread runs: no difference there
    assert any_count > 200 and (differing > 0 or blas.name == "mkl")


@pytest.mark.parametrize("freeze", [None, "False"])
def test_what_importing_made_is_out_of_the_collectors_passes(freeze):
    """numpy's, dask's and pargraph's modules, classes and functions live as long as the
    process: after ``import pargraph`` the collector's full passes no longer walk them, unless
    ``pargraph.freeze-gc`` is False. Objects made later are collected as before."""
    program = ("import gc, pargraph\n"
               "frozen = gc.get_freeze_count()\n"
               "cycle = []; cycle.append(cycle); del cycle; gone = gc.collect()\n"
               "print(frozen, gone)")
    env = {k: v for k, v in os.environ.items() if k != "DASK_PARGRAPH__FREEZE_GC"}
    if freeze is not None:
        env["DASK_PARGRAPH__FREEZE_GC"] = freeze
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          env=env)
    assert done.returncode == 0, done.stderr
    frozen, gone = map(int, done.stdout.split())
    assert (frozen > 10_000) if freeze is None else (frozen == 0)
    assert gone >= 1


def test_the_garbage_collector_is_paused_while_graphs_are_built_and_run(monkeypatch):
    """Each full pass of Python's collector walks every node of a big graph: it is off while
    backward() builds one and while a run plans, runs and commits one, and on again after;
    a program that turned it off keeps it off; ``pargraph.pause-gc`` False leaves it alone."""
    import gc

    seen = []
    forward = ops.exp.forward
    monkeypatch.setattr(ops.exp, "forward", lambda x, out=None: seen.append(gc.isenabled())
                        or forward(x, out=out))
    from pargraph.autograd import engine

    original_gradients = engine.gradient_nodes

    def gradients(*args, **kwargs):
        seen.append(("backward", gc.isenabled()))
        return original_gradients(*args, **kwargs)

    monkeypatch.setattr(engine, "gradient_nodes", gradients)
    assert gc.isenabled()
    x = pargraph.ones(3, requires_grad=True)
    x.exp().sum().backward()
    x.grad.numpy()
    assert seen == [("backward", False), False] and gc.isenabled()
    seen.clear()
    gc.disable()
    try:
        pargraph.ones(2).exp().numpy()
        assert seen == [False] and not gc.isenabled()
    finally:
        gc.enable()
    seen.clear()
    with dask.config.set({"pargraph.pause-gc": False}):
        pargraph.ones(2).exp().numpy()
    assert seen == [True] and gc.isenabled()


_LOCAL_STEP_PROBE = """
import collections, sys
import dask, pargraph
from pargraph import nn, optim
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
opt = optim.Adam(model.parameters(), lr=0.1)
x, y = pargraph.randn(16, 4), pargraph.randint(0, 2, (16,))

def step():
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss

compiled = pargraph.compile(step)
for _ in range(3):
    step().item(), compiled().item()
entered = collections.Counter()

def listen(frame, event, arg):
    name = frame.f_globals.get("__name__", "")
    if event == "call" and name.startswith("pargraph.remote"):
        entered[name + "." + frame.f_code.co_name] += 1

for scheduler in ("sync", "threads"):
    with dask.config.set(scheduler=scheduler):
        sys.setprofile(listen)
        step().item(), compiled().item()
        sys.setprofile(None)
print(dict(entered))
"""


def test_a_local_step_enters_no_function_of_the_cluster_wing():
    """Eager and compiled steps on sync and on threads, with no cluster ever used in the
    process, call nothing in ``pargraph.remote`` (a fresh process: another test's cluster
    would leave held values to check)."""
    done = subprocess.run([sys.executable, "-c", _LOCAL_STEP_PROBE], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "{}"
