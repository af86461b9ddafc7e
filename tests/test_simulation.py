"""The simulation of a run's tasks on lanes: how nodes running at once share a process's GIL
(``pargraph.simulation``; the forecasts built on it are in test_forecast.py)."""

import pytest

import pargraph
from pargraph.simulation import Outcome, Simulation, Task


@pytest.mark.parametrize("shares, two_threads", [
    ((0.0, 0.0), (0.01, 0.01)),  # neither holds the GIL: side by side at their own pace
    ((0.4, 0.4), (0.014, 0.014)),  # one kind: each 1 + share times its time, as measured
    ((1.0, 1.0), (0.02, 0.02)),  # both hold it throughout: they take turns
    ((1.3, 1.3), (0.023, 0.023)),  # a pair slower than one thread making both's calls
    ((1.0, 0.0), (0.01, 0.01)),  # one holds it, the other never asks for it
    ((0.6, 0.2), (0.012, 0.012)),  # two kinds: each slowed by the smaller share
])
def test_nodes_running_side_by_side_slow_each_other_by_their_gil_shares(shares, two_threads):
    """Two one-node tasks of 10 ms each, with their shares (over their time on a core): on
    one thread one after the other; on two threads side by side, each node's segment as long
    as the share it has in common with the other says, however their shares add up."""
    nodes = [pargraph.ones(1)._node, pargraph.zeros(1)._node]

    def run(threads: int) -> tuple[float, list[float]]:
        outcome = Outcome(("threads", threads), 0.0, threads)
        end = Simulation([Task([0], 0), Task([1], 0)], nodes, [0.01, 0.01], list(shares),
                          1, threads, False, None, 0.0, outcome).run()
        lasted = {s.key: s.stop - s.start for s in outcome.segments}
        return end, [lasted[n.key] for n in nodes]

    assert run(1) == (pytest.approx(0.02), [pytest.approx(0.01)] * 2)
    end, lasted = run(2)
    assert lasted == [pytest.approx(t) for t in two_threads]
    assert end == pytest.approx(max(two_threads))


def test_a_short_node_beside_a_long_one_slows_it_only_while_both_run():
    """A 4 ms node beside a 10 ms one, both holding the GIL throughout: they share it while
    both run (the short one ends at 8 ms, the long one has done 4 ms of its work), then the
    long one goes at its own pace for its last 6 ms."""
    nodes = [pargraph.ones(1)._node, pargraph.zeros(1)._node]
    outcome = Outcome(("threads", 2), 0.0, 2)
    end = Simulation([Task([0], 0), Task([1], 0)], nodes, [0.004, 0.01], [1.0, 1.0], 1, 2,
                      False, None, 0.0, outcome).run()
    stops = {s.key: s.stop for s in outcome.segments}
    assert stops[nodes[0].key] == pytest.approx(0.008)
    assert end == stops[nodes[1].key] == pytest.approx(0.014)
    assert outcome.gil_wait == pytest.approx(0.004 + 0.004)


def test_a_node_with_no_gil_share_never_waits_for_the_gil():
    """Each local task first holds its process's GIL for the scheduler's cost per task. A
    node that holds no GIL (share 0) starts right after its own task's cost, whichever lane
    holds the GIL then, and its segment lasts its own seconds. Nodes that hold it throughout
    share it with what runs beside them: the first with the other lane's task cost (2 ms at
    half pace), then with the second node, which ends 2 ms after the first.
    """
    nodes = [pargraph.ones(1)._node, pargraph.zeros(1)._node]

    def segments(share: float) -> list:
        outcome = Outcome(("threads", 2), 0.0, 2)
        tasks = [Task([0], 0), Task([1], 0)]
        Simulation(tasks, nodes, [0.01, 0.01], [share, share], 1, 2, False, None, 0.0,
                    outcome, task_cost=0.002).run()
        return sorted(outcome.segments, key=lambda s: s.start)

    free = segments(0.0)
    assert [s.stop - s.start for s in free] == pytest.approx([0.01, 0.01])
    assert [s.start for s in free] == pytest.approx([0.002, 0.004])
    held = segments(1.0)
    assert [s.start for s in held] == pytest.approx([0.002, 0.006])
    assert [s.stop for s in held] == pytest.approx([0.022, 0.024])


def test_two_kinds_measured_side_by_side_slow_each_other_as_measured():
    """Two 10 ms nodes whose kinds were measured side by side: the first slowed by half its
    time (it goes at 2/3 of its pace), the second not at all, whatever their shares say. The
    second ends at 10 ms; the first has done 6.67 ms of work then, and ends 3.33 ms later.
    Kinds not measured together keep the rule of the smaller share."""
    nodes = [pargraph.ones(1)._node, pargraph.zeros(1)._node]

    def stops(kinds: list[int], pairs: dict) -> list[float]:
        outcome = Outcome(("threads", 2), 0.0, 2)
        Simulation([Task([0], 0), Task([1], 0)], nodes, [0.01, 0.01], [0.2, 0.2], 1, 2, False,
                   None, 0.0, outcome, kinds=kinds, pairs=pairs).run()
        stop = {s.key: s.stop for s in outcome.segments}
        return [stop[n.key] for n in nodes]

    measured = {(0, 1): 0.5, (1, 0): 0.0, (0, 0): 0.9, (1, 1): 0.9}
    assert stops([0, 1], measured) == pytest.approx([0.01 + 0.01 / 3, 0.01])
    # the same kind twice: its own pair's slowing
    assert stops([0, 0], measured) == pytest.approx([0.019, 0.019])
    # a kind not measured in pairs (-1), or no pairs at all: 1 + the smaller share
    assert stops([0, -1], measured) == pytest.approx([0.012, 0.012])
    assert stops([0, 1], {}) == pytest.approx([0.012, 0.012])


@pytest.mark.parametrize("on_core, share, lasted", [
    # nodes that compute: each loses the hand-overs as often as the other holds the lock
    (1.0, 1.0, 0.01 * (1 + 1.0 + 0.2)),
    (1.0, 0.5, 0.01 * (1 + 0.5 + 0.2 * 0.5)),
    (1.0, 0.0, 0.01),  # beside a node that never holds the lock, nothing to hand over
    (0.2, 0.0, 0.01),  # nodes that mostly wait: their retake of the GIL is modelled instead
])
def test_nodes_that_compute_side_by_side_lose_the_gils_hand_overs(on_core, share, lasted):
    """Two 10 ms nodes holding the GIL for ``share`` of their time, with a hand-over of 2 ms:
    side by side on two threads each goes at ``1 / (1 + share + 0.2 * share)`` of its pace
    (the lock shared, and a hand-over each time the other holds it); on one thread, where
    none runs beside another, each takes its own time."""
    nodes = [pargraph.ones(1)._node, pargraph.zeros(1)._node]

    def run(threads: int) -> tuple[float, list[float]]:
        outcome = Outcome(("threads", threads), 0.0, threads)
        end = Simulation([Task([0], 0), Task([1], 0)], nodes, [0.01, 0.01], [share, share], 1,
                         threads, False, None, 0.0, outcome, on_core=[on_core] * 2,
                         handover=0.002).run()
        spans = {s.key: s.stop - s.start for s in outcome.segments}
        return end, [spans[n.key] for n in nodes]

    assert run(1) == (pytest.approx(0.02), [pytest.approx(0.01)] * 2)
    end, spans = run(2)
    assert spans == [pytest.approx(lasted)] * 2 and end == pytest.approx(lasted)


@pytest.mark.parametrize("on_core, switch_interval, alone", [
    (0.04, 2e-4, True),  # 40 us of Python, then a wait: each runs to its end, in turn
    (0.04, 0.0, False),  # no interval given: the four share the GIL as their shares say
    (0.4, 2e-4, False),  # 400 us, longer than the interval: the holder is asked to drop it
])
def test_a_waiting_nodes_short_stretch_of_python_takes_the_gil_alone(on_core, switch_interval,
                                                                      alone):
    """Four 1 ms nodes that mostly wait, on four threads, each holding the GIL while on a
    core: a stretch shorter than the switch interval holds the lock to its end, the others
    waiting in turn (a waiter asks the holder to drop it only after an interval), so the
    nodes end one stretch apart and the waits count as waits for the GIL; else the four
    stretches share the lock and end together, each after all four's time."""
    nodes = [pargraph.full((1,), float(k))._node for k in range(4)]
    outcome = Outcome(("threads", 4), 0.0, 4)
    end = Simulation([Task([k], 0) for k in range(4)], nodes, [1e-3] * 4, [1.0] * 4, 1, 4,
                     False, None, 0.0, outcome, on_core=[on_core] * 4,
                     switch_interval=switch_interval).run()
    stops = sorted(s.stop for s in outcome.segments)
    stretch = 1e-3 * on_core
    if alone:
        assert stops == pytest.approx([1e-3 + k * stretch for k in range(4)])
        assert outcome.gil_wait == pytest.approx(6 * stretch)
    else:
        assert stops == pytest.approx([1e-3 + 3 * stretch] * 4)
    assert end == pytest.approx(stops[-1])


def test_a_joins_readers_on_a_cluster_leave_together_once_its_last_source_is_reported():
    """Four sources on four workers end 3 ms apart, each read by a task on every worker (a
    block's join). The scheduler's time per task falls where the task's end is reported, as
    dask's scheduler takes in a finished task and sends off the tasks it made ready: the four
    readers then reach their workers together, fetch what they read once there, and start
    at the same moment, the last source's report, the task latency and the transfer latency
    after its end; not one scheduler's time per task apart."""
    from pargraph.machine_costs import Network

    network = Network(task_latency=3e-3, scheduler_task=2e-3, run_latency=0.0, run_node=0.0,
                      transfer_latency=1.5e-3, bandwidth=1e12, replicate_latency=0.0,
                      worker_task=0.5e-3)
    nodes = [pargraph.ones(1)._node for _ in range(8)]
    sources = [Task([k], k) for k in range(4)]
    readers = [Task([4 + k], k, reads={s: {s} for s in range(4)}) for k in range(4)]
    seconds = [0.010, 0.013, 0.016, 0.019] + [0.001] * 4
    outcome = Outcome(("workers", 4), 0.0, 4)
    Simulation(sources + readers, nodes, seconds, [0.0] * 8, 4, 1, True, network, 0.0,
               outcome).run()
    starts = {s.key: s.start for s in outcome.segments}
    # each source starts once sent: travel and the worker's own time, no scheduler's time
    assert [starts[n.key] for n in nodes[:4]] == pytest.approx([3e-3 - 2e-3] * 4)
    last_end = 1e-3 + 0.019
    assert [starts[n.key] for n in nodes[4:]] == pytest.approx([last_end + 3e-3 + 1.5e-3] * 4)
