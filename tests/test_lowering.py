"""Plans and dask graphs (pargraph.engine.lowering) through their own interface: what a run lowers
to, one task or a task per group, plans cached by structure."""

import dask
import numpy as np

from pargraph import ops
from pargraph.engine.lowering import PlanCache, SinglePlan, lower, member_sources, plan
from pargraph.engine.partition import Granularity
from pargraph.runtime import ENV, EXT, LIT, PART, Arg


def _branches(width=4, n=64):
    x = ops.constant(np.ones((n, n), np.float32))
    heads = [ops.matmul(ops.exp(ops.mul(x, float(k + 1))), x) for k in range(width)]
    return ops.add_n(*heads)


def test_a_small_run_is_one_task_that_runs_inline():
    out = ops.add(ops.constant(np.ones(2, np.float32)), 1.0)
    order, computed = plan([out])
    lowered = lower(order, computed, [out])
    assert lowered.single is not None and lowered.tasks == 2  # the run and its output's pick
    result = dask.get(lowered.graph, lowered.keys)
    np.testing.assert_array_equal(result[0], [2.0, 2.0])


def test_independent_branches_become_group_tasks_named_by_what_they_compute():
    out = _branches()
    order, computed = plan([out])
    granularity = Granularity(workers=2, single_task_below=0.0, grain=0.0)  # no coarsening
    lowered = lower(order, computed, [out], granularity)
    assert lowered.single is None and 2 <= lowered.tasks < len(computed)
    assert lowered.plan.external and all(kind in (Arg.INPUT, Arg.GROUP)
                                         for refs in lowered.plan.external for kind, _ in refs)
    values = lowered.values(dask.get(lowered.graph, lowered.keys))
    x = np.ones((64, 64), np.float32)
    expected = sum(np.exp(x * (k + 1)) @ x for k in range(4))
    np.testing.assert_allclose(values[0], expected, rtol=1e-5)


def test_a_structure_seen_before_reuses_its_plan():
    granularity = Granularity(workers=2, single_task_below=0.0, grain=0.0)
    hits, misses = PlanCache.hits, PlanCache.misses
    for _ in range(2):
        out = _branches(width=5)  # a structure no other test lowers
        order, computed = plan([out])
        lower(order, computed, [out], granularity)
    assert (PlanCache.hits, PlanCache.misses) == (hits + 1, misses + 1)


def test_member_sources_name_where_each_argument_comes_from():
    x = ops.constant(np.ones(2, np.float32))
    a = ops.add(x, 1.0)
    b = ops.mul(a, x)
    sources, literal, external = member_sources([a, b], lambda node: (("in", id(node)), None))
    assert sources == [[(EXT, 0), (LIT, 1)], [(ENV, 0), (EXT, 0)]]
    assert literal == [(0, (1,))] and external == [("in", id(x))]
    parts, _, _ = member_sources([b], lambda node: (("group", 7), 3) if node is a else
                                 (("in", 0), None))
    assert parts == [[(PART, (0, 3)), (EXT, 1)]]
    assert isinstance(SinglePlan(*plan([b]), [b]).external, list)
