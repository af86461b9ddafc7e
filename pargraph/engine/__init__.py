"""The engine: how a graph of nodes runs on this machine.

A run is planned (:mod:`~pargraph.engine.partition`, which nodes share a task, and on a cluster
:mod:`~pargraph.engine.placement`, which worker runs each), lowered into dask tasks
(:mod:`~pargraph.engine.lowering`) and handed to a scheduler (:mod:`~pargraph.engine.execution`):
the calling thread, pargraph's helper threads (:mod:`~pargraph.engine.threads`), or a cluster
through :mod:`pargraph.remote`, the only place that talks to a ``distributed.Client``. What one
task runs is :mod:`pargraph.runtime`, below both, since workers run it too.
"""
