"""Traces, summaries, Chrome export, timelines, graph pictures and progress bars."""

import json

import dask
import numpy as np
import pytest

import pargraph
from pargraph.graph import toposort
from pargraph.trace import NodeRecord, Trace, critical_path


def two_branches(size=200):
    rng = np.random.default_rng(0)
    a = pargraph.tensor(rng.standard_normal((size, size)) / size ** 0.5, requires_grad=True)
    b = pargraph.tensor(rng.standard_normal((size, size)) / size ** 0.5, requires_grad=True)
    left, right = a, b
    for _ in range(4):
        left = (left @ a).tanh()
        right = (right @ b).tanh()
    return a, b, (left.sum() + right.sum())


def _overlaps(records) -> bool:
    return any(x.lane != y.lane and x.start < y.stop and y.start < x.stop
               for k, x in enumerate(records) for y in records[k + 1:])


def check_trace(tr, expected_keys, lanes_overlap, phases=("forward", "backward")):
    records = tr.nodes()
    keys = [r.key for r in records]
    assert sorted(keys) == sorted(expected_keys)  # every node exactly once
    by_key = {r.key: r for r in records}
    for r in records:
        assert r.ready <= r.start <= r.stop
        for i in r.inputs:
            assert r.start >= by_key[i].stop  # a node waits for all of its inputs
            assert r.ready >= by_key[i].stop
    assert _overlaps(records) == lanes_overlap
    assert set(phases) <= {r.phase for r in records}
    return records


def _expected_keys(loss):
    return [n.key for n in toposort([loss._node]) if n.value is None]


def test_trace_of_two_branches_on_threads():
    # Two lanes run at once unless the machine's other work takes a core for the whole step:
    # of three tries, one at least shows the branches overlapping.
    for _ in range(3):
        a, b, loss = two_branches()
        forward_keys = _expected_keys(loss)
        with dask.config.set(scheduler="threads", num_workers=2), pargraph.trace() as tr:
            loss.backward()
            pargraph.compute()
        records = tr.nodes()
        if _overlaps(records):
            break
    assert set(forward_keys) <= {r.key for r in records}
    backward_keys = [r.key for r in records if r.phase != "forward"]
    check_trace(tr, forward_keys + backward_keys, lanes_overlap=True)
    assert len({r.lane for r in records}) == 2
    # The critical path of this graph, by hand: the longer branch's chain of matmul+tanh
    # forward, the sum, the final add, and the backward of that branch.
    length, path = critical_path(records)
    assert path[0].inputs == () or all(i not in {r.key for r in records} for i in path[0].inputs)
    for earlier, later in zip(path, path[1:]):
        assert earlier.key in later.inputs
    assert length == pytest.approx(sum(r.duration for r in path))
    summary = tr.summary(print_it=False)
    assert summary.work == pytest.approx(sum(r.duration for r in records))
    assert summary.available_parallelism == pytest.approx(summary.work / length)
    assert summary.achieved_parallelism == pytest.approx(summary.work / summary.wall)
    assert summary.by_phase["forward"] > 0 and summary.by_phase["backward"] > 0
    assert "accumulate" in summary.by_phase  # a and b feed several matmuls: fan-in points


def test_trace_on_sync_has_no_overlap():
    _, _, loss = two_branches()
    expected = _expected_keys(loss)
    with dask.config.set(scheduler="sync"), pargraph.trace() as tr:
        loss.item()
    check_trace(tr, expected, lanes_overlap=False, phases=("forward",))
    assert len({r.lane for r in tr.nodes()}) == 1


def test_trace_on_an_in_process_cluster(local_client):
    # Larger branches: the cluster's scheduler decides placement; long tasks make the overlap
    # of the two independent branches certain rather than likely.
    a, b, loss = two_branches(size=500)
    forward_keys = _expected_keys(loss)
    with dask.config.set(scheduler=local_client), pargraph.trace() as tr:
        loss.backward()
        pargraph.compute()
    records = tr.nodes()
    backward_keys = [r.key for r in records if r.phase != "forward"]
    check_trace(tr, forward_keys + backward_keys, lanes_overlap=True)
    assert all(r.lane.startswith("inproc://") for r in records)


def _record(key, start, stop, inputs=(), lane="t0", phase="forward"):
    return NodeRecord(key, key.split("-")[0], phase, "", tuple(inputs), start, start, stop, lane)


def test_summary_numbers_for_known_node_costs():
    # a (1 ms) feeds b (2 ms) and c (5 ms), which both feed d (1 ms); b and c ran at once.
    tr = Trace()
    for r in [_record("a-1", 0.000, 0.001), _record("b-2", 0.001, 0.003, ["a-1"]),
              _record("c-3", 0.001, 0.006, ["a-1"], lane="t1", phase="backward"),
              _record("d-4", 0.006, 0.007, ["b-2", "c-3"], phase="update")]:
        tr.records[r.key] = r
    tr.runs.append((0.0, 0.008))
    summary = tr.summary(print_it=False)
    assert summary.work == pytest.approx(0.009)
    assert summary.critical_path == pytest.approx(0.007)  # a + c + d
    assert [r.key for r in summary.critical_nodes] == ["a-1", "c-3", "d-4"]
    assert summary.available_parallelism == pytest.approx(9 / 7)
    assert summary.achieved_parallelism == pytest.approx(9 / 8)
    assert summary.overhead == pytest.approx(0.001)  # 8 ms wall, 7 ms with a node running
    assert summary.by_phase == pytest.approx({"forward": 0.003, "backward": 0.005,
                                              "update": 0.001})
    assert summary.lanes == 2 and "available parallelism" in str(summary)


def test_chrome_trace_has_the_trace_event_fields(tmp_path):
    _, _, loss = two_branches()
    with dask.config.set(scheduler="threads"), pargraph.trace() as tr:
        loss.backward()
        pargraph.compute()
    path = tmp_path / "trace.json"
    tr.to_chrome(path)
    events = json.loads(path.read_text())["traceEvents"]
    slices = [e for e in events if e["ph"] == "X"]
    assert len(slices) == len(tr.nodes())
    for event in slices:
        assert {"name", "ph", "ts", "dur", "pid", "tid"} <= set(event)
        assert event["dur"] >= 0 and event["cat"] in ("forward", "backward", "accumulate")
    waits = [e for e in events if e["ph"] in ("b", "e")]
    assert len(waits) % 2 == 0 and all(e["cat"] == "wait" for e in waits)
    names = [e for e in events if e["ph"] == "M" and e["name"] == "thread_name"]
    assert len(names) == len({r.lane for r in tr.nodes()})


def test_plot_writes_a_png(tmp_path):
    _, _, loss = two_branches()
    with pargraph.trace() as tr:
        loss.item()
    tr.plot(tmp_path / "timeline.png")
    assert (tmp_path / "timeline.png").read_bytes()[:4] == b"\x89PNG"


def test_optimizer_updates_are_traced_as_update_phase():
    w = pargraph.ones(3, requires_grad=True)
    opt = pargraph.optim.SGD([w], lr=0.1, momentum=0.9)
    (w * w).sum().backward()
    w.grad.numpy()
    with pargraph.trace() as tr:
        opt.step()
    assert {r.phase for r in tr.nodes()} == {"update"}
    assert all(r.key.startswith("sgd_update-") for r in tr.nodes())


def test_progress_bar_locally(capsys):
    with pargraph.progress(minimum=0):
        assert pargraph.arange(5.0).exp().sum().item() == pytest.approx(np.exp(np.arange(5)).sum())
    assert "100%" in capsys.readouterr().out


def test_progress_on_a_cluster(local_client):
    with dask.config.set(scheduler=local_client), pargraph.progress():
        assert pargraph.arange(4.0).sum().item() == 6.0


def test_trace_runs_the_backward_recorded_inside_its_block():
    model = pargraph.nn.Linear(3, 2)
    with pargraph.trace() as tr:
        loss = model(pargraph.ones(4, 3)).sum()
        loss.backward()  # deferred: the block's end runs it
    phases = {r.phase for r in tr.nodes()}
    assert "forward" in phases and "backward" in phases
    assert model.weight.grad._node.value is not None


def test_progress_runs_the_backward_recorded_inside_its_block():
    w = pargraph.ones(3, requires_grad=True)
    with pargraph.progress():
        (w * 2).sum().backward()
    assert w.grad._node.value is not None and w.grad.tolist() == [2.0, 2.0, 2.0]


def test_summary_of_an_empty_trace_says_why(capsys):
    x = (pargraph.ones(2) * 3).sum()
    x.item()
    with pargraph.trace() as tr:
        x.item()  # realized before the block: nothing runs
    summary = tr.summary()
    assert summary.nodes == 0
    out = capsys.readouterr().out
    assert "no node ran inside the trace block" in out and "item()" in out


def test_summary_counts_plan_and_backward_cache_hits_and_misses():
    model = pargraph.nn.Linear(32, 32)
    x = pargraph.randn(512, 32)
    with dask.config.set({"pargraph.single-task-below": 0}), pargraph.trace() as tr:
        for _ in range(3):
            model.zero_grad()
            model(x).relu().sum().backward()
            pargraph.compute()
    summary = tr.summary(print_it=False)
    assert summary.plan_misses >= 1 and summary.plan_hits >= 2
    assert summary.backward_hits >= 2  # the first step may hit a template an earlier test made
    assert "plan cache" in str(summary) and "backward cache" in str(summary)
