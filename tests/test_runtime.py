"""What runs inside a task (pargraph.runtime) through its own interface: a FusedTask's members
and their sources, what it returns and drops, its errors, its generated form, pickling."""

import os
import pickle
import subprocess
import sys

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


_ALLOCATOR_PROBE = """
import resource, sys, numpy as np, pargraph
from pargraph import runtime
w = pargraph.ones(3, requires_grad=True)
step = pargraph.compile(lambda: (w * 2).sum())
step(); step()

def faults():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(4):
        a = np.ones(10 << 20, np.float32)  # 40 MiB: above glibc's largest adaptive threshold
        del a
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

faults()
print(runtime.allocator.tuned, faults())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's thresholds")
@pytest.mark.parametrize("setting", [None, "system"])
def test_a_compiled_step_keeps_freed_arrays_for_the_next_unless_told_not_to(setting):
    """A loop of compiled steps reuses its freed large arrays: after the first run, a 40 MiB
    array freed and made again costs no page faults (glibc's defaults hand it back to the
    system and fault it in again); ``pargraph.malloc: system`` leaves glibc alone."""
    env = {k: v for k, v in os.environ.items() if k != "DASK_PARGRAPH__MALLOC"}
    if setting:
        env["DASK_PARGRAPH__MALLOC"] = setting
    done = subprocess.run([sys.executable, "-c", _ALLOCATOR_PROBE], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    tuned, faults = done.stdout.split()
    assert tuned == str(setting is None)
    if setting is None:
        assert int(faults) < 20


def test_the_allocator_setting_is_checked():
    import dask

    from pargraph.runtime import Allocator

    with dask.config.set({"pargraph.malloc": "jemalloc"}), \
            pytest.raises(ValueError, match="pargraph.malloc is 'jemalloc'; expected"):
        Allocator().for_steps()


def test_a_traced_ops_kind_holds_its_attributes():
    """Two convolutions of one input, a 1x1 kernel and a 5x5 one: their weight gradients read
    arguments of the same shapes and differ in time many-fold, so each is a kind of its own,
    with its own call kept, and the forecast measures each apart."""
    import dask

    import pargraph
    from pargraph.machine_costs import call_costs

    x = pargraph.randn(8, 4, 12, 12)
    small = pargraph.nn.Conv2d(4, 4, 1)
    big = pargraph.nn.Conv2d(4, 4, 5, padding=2)
    with dask.config.set(scheduler="threads", num_workers=1), pargraph.trace() as tr:
        (small(x).sum() + big(x).sum()).backward()
    kinds = {tr.records[key].op: set() for key in tr.samples.kinds}
    for key, kind in tr.samples.kinds.items():
        kinds[tr.records[key].op].add(kind)
    assert len(kinds["conv_weight_grad"]) == 2
    weight_shapes = {tr.samples.calls[kind][1]["weight_shape"]
                     for kind in kinds["conv_weight_grad"]}
    assert weight_shapes == {(4, 4, 1, 1), (4, 4, 5, 5)}
    measured = call_costs(tr, budget=60.0)  # every kind, however busy the machine
    assert kinds["conv_weight_grad"] <= set(measured)
