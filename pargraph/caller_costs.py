"""The caller's costs, measured for forecasts: how much longer the calling thread's Python
takes after it waited on a run (:func:`measure_away`), which :mod:`pargraph.forecast` charges
each configuration for its waits; docs/forecast.md says how it is measured and what it leaves
out.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass

import dask
import numpy as np

from pargraph.trace import outside_seconds

#: Seconds the caller waits before each small step :func:`measure_away` times: from none to
#: about a one-thread run of the benchmarks' sleeping graphs (145-330 ms); longer waits take
#: the longest's slowing.
AWAY_SECONDS = (0.0, 0.005, 0.015, 0.04, 0.1, 0.25)


@dataclass(frozen=True)
class Away:
    """How much longer the calling thread's Python takes after it waited a while
    (:func:`measure_away`): a small step spent ``took[k]`` seconds outside its run after a
    wait of ``after[k]`` seconds, ``after[0]`` being none.

    Examples
    --------
    >>> away = Away((0.0, 0.1), (1e-3, 2e-3))
    >>> round(away.extra(0.05), 6), away.extra(1.0)
    (0.0005, 0.001)
    """

    after: tuple[float, ...]
    took: tuple[float, ...]

    def extra(self, waited: float) -> float:
        """Seconds the caller's Python takes beyond its time right after a run, coming back
        from a wait of ``waited`` seconds: interpolated between the waits measured, the
        longest's past them, and never less after a longer wait."""
        extras = np.maximum.accumulate(np.maximum(np.asarray(self.took) - self.took[0], 0.0))
        return float(np.interp(waited, self.after, extras))


def measure_away(after: Sequence[float] = AWAY_SECONDS, repeats: int = 7) -> Away:
    """How much longer the calling thread's Python takes after a wait of each of ``after``
    seconds: the median time outside its run of a small training step (eight layers of
    elementwise ops, their backward, a run on one of pargraph's threads, the loss read back)
    over ``repeats`` steps after each wait (three times as many right after another), the
    waits taking turns, after 20 steps untimed.
    While the caller waits on a run, the machine's other work (on a shared host, other
    machines') evicts the caches that held its code and objects, and the first Python after
    the run refills them (docs/forecast.md); about 3 s here.

    Examples
    --------
    >>> away = measure_away((0.0, 0.01), repeats=1)
    >>> away.after == (0.0, 0.01) and away.extra(0.0) == 0.0 <= away.extra(0.01)
    True
    """
    from pargraph.factories import ones

    x = ones(8, requires_grad=True)

    def step() -> None:
        x.grad = None
        h = x
        for _ in range(8):
            h = (h * 2 + 1).tanh()
        loss = h.sum()
        loss.backward()
        loss.item()

    times: list[list[float]] = [[] for _ in after]
    with dask.config.set(scheduler="threads", num_workers=1):
        for _ in range(20):
            step()
        for _ in range(repeats):
            for k, waited in enumerate(after):
                time.sleep(waited)
                # the steps right after another cost no wait: three a round, for a steadier base
                times[k] += [outside_seconds(step) for _ in range(1 if waited else 3)]
    return Away(tuple(float(w) for w in after), tuple(float(np.median(t)) for t in times))


@functools.cache
def away_costs() -> Away:
    """:func:`measure_away`, measured once per process.

    Examples
    --------
    >>> away_costs().extra(0.0)
    0.0
    """
    return measure_away()
