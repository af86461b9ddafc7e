"""dask's collection protocol for tensors: ``dask.compute(t)``, ``dask.persist(t)``,
``dask.visualize(t)`` and ``t.__dask_graph__()`` work on a Tensor as on a dask array.

The graph is the one pargraph itself would run (its lowering, one task under the tensor's
own key at the end); the default scheduler is pargraph's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pargraph import ops
from pargraph.engine import execution, modes
from pargraph.engine.lowering import lower, plan


class DaskCollection:
    """The protocol's methods; a subclass has ``_node``, ``_apply(op, ...)`` (the one way to
    apply an op) and ``_wrap(node)`` (a plain tensor around a node)."""

    __slots__ = ()

    def __dask_graph__(self) -> dict:
        with execution.local.structure:  # as a run's plan: no other thread commits meanwhile
            order, computed = plan([self._node])
            outputs = [self._node] if computed else []
            return lower(order, computed, outputs,
                         modes.granularity(modes.DEFAULT_GET), named_outputs=True).graph

    def __dask_keys__(self) -> list:
        return [self._node.key]

    def __dask_layers__(self) -> tuple:
        return (self._node.key,)

    def __dask_postcompute__(self):
        return _first, ()

    def __dask_postpersist__(self):
        return self._rebuild_persisted, (self._node.key,)

    def _rebuild_persisted(self, results: dict, key: str, *, rename=None) -> Any:
        return self._apply(ops.constant, np.asarray(results[key]))

    def __dask_tokenize__(self) -> str:
        return self._node.key

    @staticmethod
    def __dask_optimize__(graph, keys, **kwargs):
        return graph

    __dask_scheduler__ = staticmethod(modes.DEFAULT_GET)


def _first(results: Sequence) -> np.ndarray:
    return results[0]
