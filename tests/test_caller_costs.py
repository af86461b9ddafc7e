"""The caller's slowing after a wait on a run (pargraph.caller_costs)."""

import time

from pargraph.caller_costs import Away, measure_away


def test_the_extra_is_interpolated_flat_past_the_longest_wait_and_never_falls():
    away = Away((0.0, 0.01, 0.02, 0.1), (1e-3, 3e-3, 2e-3, 5e-3))
    assert away.extra(0.0) == 0.0
    assert away.extra(0.005) == 1e-3
    assert away.extra(0.015) == away.extra(0.02) == 2e-3  # a longer wait costs no less
    assert away.extra(0.1) == away.extra(10.0) == 4e-3


def test_the_callers_slowing_after_a_wait_is_measured_outside_the_runs():
    """The measurement waits, then times a small step's Python outside its run."""
    start = time.perf_counter()
    away = measure_away((0.0, 0.05), repeats=2)
    assert time.perf_counter() - start >= 2 * 0.05
    assert away.after == (0.0, 0.05) and all(0 < t < 0.05 for t in away.took)
    assert away.extra(0.0) == 0.0 <= away.extra(0.01) <= away.extra(0.05) == away.extra(1.0)
