"""What runs inside a task (pargraph.runtime) through its own interface: a FusedTask's members
and their sources, what it returns and drops, its errors, its generated form, pickling."""

import pickle

import numpy as np
import pytest

from pargraph import ops
from pargraph.runtime import (
    ENV,
    EXT,
    LIT,
    PART,
    FusedTask,
    Source,
    release_schedule,
    straight_line,
)


def _members():
    """x + 2, exp of that, times an element of a tuple argument: three members."""
    x = ops.constant(np.ones(3, np.float32))
    other = ops.constant(np.ones(3, np.float32))
    first = ops.add(x, 2.0)
    second = ops.exp(first)
    third = ops.mul(second, other)
    sources = [[(EXT, 0), (LIT, 2.0)], [(ENV, 0)], [(ENV, 1), (PART, (1, 1))]]
    return [first, second, third], sources


def test_source_kinds_are_named_and_compare_as_their_numbers():
    assert [Source.ENV, Source.EXT, Source.PART, Source.LIT] == [ENV, EXT, PART, LIT]
    assert [ENV, EXT, PART, LIT] == [0, 1, 2, 3]


def test_a_fused_task_runs_its_members_in_order_from_their_sources():
    nodes, sources = _members()
    x = np.array([0.0, 1.0, 2.0], np.float32)
    pair = (None, np.array([1.0, 2.0, 3.0], np.float32))
    task = FusedTask(nodes, sources, outputs=[0, 2])
    first, third = task(x, pair)
    np.testing.assert_array_equal(first, x + 2)
    np.testing.assert_allclose(third, np.exp(x + 2) * pair[1], rtol=1e-6)
    assert third.dtype == np.float32
    # the second member is read by the third only: dropped after it; the outputs are kept
    assert release_schedule(sources, [0, 2]) == [(), (), (1,)]
    run = straight_line(task)
    for a, b in zip(run((x, pair)), (first, third)):
        np.testing.assert_array_equal(a, b)


def test_a_failing_member_raises_its_own_type_naming_the_op():
    nodes, sources = _members()
    task = FusedTask(nodes, sources, outputs=[2])
    with pytest.raises(ValueError, match=r"^mul: .*\n  the failing node was recorded at"):
        task(np.ones(4, np.float32), (None, np.ones(3, np.float32)))


def test_a_fused_task_pickles_to_the_same_computation():
    nodes, sources = _members()
    task = FusedTask(nodes, sources, outputs=[2])
    travelled = pickle.loads(pickle.dumps(task))
    x, pair = np.arange(3, dtype=np.float32), (None, np.full(3, 2.0, np.float32))
    np.testing.assert_array_equal(travelled(x, pair)[0], task(x, pair)[0])
    assert [n.key for n in travelled.nodes] == [n.key for n in nodes]
