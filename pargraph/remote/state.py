"""What this process knows of the clusters it ran on: one :class:`ClusterState`."""

from __future__ import annotations

import itertools
import secrets
import weakref

import numpy as np

from pargraph.context import context


class ClusterState:
    """The cluster wing's mutable state, in one object (``clusters``): per client, per value
    sent, per replicated step; the recovery sources and what they put back."""

    def __init__(self) -> None:
        #: Numbers each run submitted to a cluster, whose task keys carry it: a run
        #: interrupted (or failed) and run again computes the same nodes, maybe grouped
        #: otherwise, and a key the scheduler still holds would stand for another task.
        self.runs = itertools.count()
        #: A token per submitted graph (see ``submit.untokenized``), unique to this process.
        self.graphs = itertools.count()
        self.session = secrets.token_hex(4)
        #: Per client: (when asked, {worker address: threads}).
        self.membership: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        #: The client comms whose scheduler has pargraph's plugins: a client that reconnects
        #: (to a restarted scheduler) gets a new comm, and the new scheduler needs them again.
        self.tuned_comms: weakref.WeakSet = weakref.WeakSet()
        #: Values held here that a cluster run has read, by node: the node's key after the
        #: first run (sent in the graph), then the Future of the copy persisted for the later
        #: runs.
        self.shipped: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        #: Per client: the training state the last step replaced (``keep_until_copied``).
        self.replaced: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        #: Per client: the copying the last step started (a ``concurrent.futures.Future``).
        self.replicating: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        #: Clients whose scheduler's Active Memory Manager pargraph stopped.
        self.replicas_kept: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        #: The asyncio tasks forgetting provenance (asyncio holds them only weakly).
        self.forgetting: set = set()
        #: Weak references to objects with a ``recover()`` method (``register_recovery``).
        self.recovery_sources: list = []
        #: Key of a lost Future -> the value a recovery source put back for it.
        self.recovered: dict[str, np.ndarray] = {}
        #: Whether a run of this process went to a cluster: only then can a value be held
        #: there, and a local step skips every check of held values.
        self.used = False
        #: The path of the last checkpoint ``pargraph.save`` wrote, for error messages.
        self.last_checkpoint: str | None = None

    def __repr__(self) -> str:
        return f"<ClusterState: {len(self.membership)} client(s) known>"


clusters = context.register("clusters", ClusterState())
