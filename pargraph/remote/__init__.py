"""The cluster wing: everything a run on a ``distributed`` cluster needs beyond the local path.

Results stay on the workers: a value slot holds a Future (or a :class:`HeldPart` of a group
task's tuple), the next run's tasks refer to its key, and only what the user asks for
(``item()``, ``numpy()``, ``state_dict()``, ``save``) is gathered. Parameters and optimizer
state never travel back and forth between steps; only new data (a batch) is sent.

Rooms, lowest first:

- :mod:`~pargraph.remote.state`: the wing's mutable state, one ``ClusterState`` object;
- :mod:`~pargraph.remote.layout`: where values live on the workers (held parts, the tasks
  that pick and keep them), used by the lowering;
- :mod:`~pargraph.remote.workers`: the cluster's workers and their threads;
- :mod:`~pargraph.remote.recovery`: losing the cluster, fetching values back;
- :mod:`~pargraph.remote.replication`: training state on two workers, provenance forgotten;
- :mod:`~pargraph.remote.submit`: a run submitted and waited for;
- :mod:`~pargraph.remote.programs`: a compiled step's run, its tasks under new keys per call;
- :mod:`~pargraph.remote.plugins`: the scheduler's and the workers' message batching;
- :mod:`~pargraph.remote.connect`: ``pargraph.connect``;
- :mod:`~pargraph.remote.dashboard`: ``pargraph.dashboard()``, an in-process cluster whose
  dashboard stays up after the block;
- :mod:`~pargraph.remote.loopback`: what the cluster's messages cost on this machine, for
  forecasts.

Every call to a ``distributed.Client`` is made here (``tests/test_structure.py`` checks it);
the engine, the compiler and the optimizers hand the client they were given to these
functions. Nothing here imports the engine; the engine calls in.
"""
