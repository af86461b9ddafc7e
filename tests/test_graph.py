"""The node graph (pargraph.graph) through its own interface: a node's lifecycle, the naming
context, topological order."""

import numpy as np

from pargraph import ops
from pargraph.graph import (
    BACKWARD,
    CUT,
    FORWARD,
    FREED,
    REALIZED,
    WAITING,
    Node,
    naming,
    recording_phase,
    toposort,
)


def _leaf(value):
    return ops.constant(np.asarray(value, dtype=np.float32))


def test_a_node_goes_from_waiting_to_realized_cut_and_freed():
    a, b = _leaf([1.0]), _leaf([2.0])
    total = ops.add(a, b)
    assert total.state == WAITING and total.inputs == (a, b)
    total.realize(np.array([3.0], np.float32), keep_inputs=True)
    assert total.state == REALIZED and total.inputs == (a, b)
    total.cut()
    assert total.state == CUT and total.inputs == ()
    total.free(keep_value=False)
    assert total.state == FREED and total.value is None


def test_nodes_take_their_phase_and_key_from_the_naming_context():
    x = _leaf([1.0])
    forward = ops.exp(x)
    with naming(BACKWARD, "exp", scope="towers.3"):
        assert recording_phase() == BACKWARD
        gradient = ops.mul(forward, forward)
    assert recording_phase() == FORWARD
    assert forward.key.startswith("exp-") and forward.phase == FORWARD
    assert gradient.key.startswith("exp_backward-") and gradient.scope == "towers.3"
    again = Node.replayed(ops.REGISTRY["mul"], (forward, forward), {}, (1,),
                          np.dtype("float32"), BACKWARD, "exp_backward", "towers.3", None)
    assert again.key.startswith("exp_backward-") and again.uid > gradient.uid


def test_toposort_puts_inputs_first_visits_each_node_once_and_stops_where_asked():
    x = _leaf([1.0])
    y = ops.exp(x)
    z = ops.add(y, y)  # y read twice
    w = ops.mul(z, x)
    order = toposort([w])
    assert order == [x, y, z, w]
    assert toposort([w], stop=lambda n: n is z) == [z, x, w]  # z's inputs not visited
    chain = x
    for _ in range(50_000):  # iterative: no recursion limit
        chain = ops.neg(chain)
    assert len(toposort([chain])) == 50_001
