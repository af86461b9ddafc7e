"""Waiting for a cluster in the calling thread with Ctrl-C held.

distributed's blocking calls (``Future.result``, ``wait``, ``Client.gather``) wait on a
``threading.Event`` for the client's event loop. A ``KeyboardInterrupt`` raised inside that
wait can leave the event's lock held, and the event loop's thread then blocks on it for good:
the next call never returns. :func:`settled` waits on an event of its own, set by the futures'
done callbacks, in slices with Ctrl-C held; a held one is raised between slices, and
distributed's call runs only once the futures have finished.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from pargraph.interrupts import interrupts

#: Seconds between the looks for a held Ctrl-C while a cluster computes.
POLL = 0.05


def settled(futures: list, then: Callable[[], Any] | None = None) -> Any:
    """Wait until ``futures`` have finished, then return ``then()`` (a blocking distributed
    call that is now quick, such as ``future.result()``), Ctrl-C held meanwhile: one pressed
    is raised as soon as the current slice of the wait ends, before ``then`` runs (inside
    another deferred block, whose commit must not be cut short, the wait goes on).

    Examples
    --------
    >>> from distributed import Client
    >>> from pargraph.remote.waiting import settled
    >>> with Client(processes=False, dashboard_address=None) as client:
    ...     future = client.submit(sum, [1, 2])
    ...     settled([future], future.result)
    3
    """
    with interrupts.deferred():
        finished = _finished(futures)
        while not finished.wait(POLL):
            if interrupts.stopping():  # raised as the block ends
                break
        else:
            return then() if then is not None else None
    raise KeyboardInterrupt  # (where the block's end held it for an outer block)


def _finished(futures: list) -> threading.Event:
    """An event of pargraph's own, set once every future has finished (done, failed or
    cancelled), from their done callbacks: distributed's Futures, or ``concurrent.futures``
    ones (a coroutine run on the client's event loop). Not distributed's ``wait(timeout=)``:
    a wait that times out keeps its futures alive, and the scheduler their tasks."""
    event = threading.Event()
    pending = [f for f in futures if not f.done()]
    if not pending:
        event.set()
        return event
    left = [len(pending)]
    lock = threading.Lock()

    def one_finished(_: Any) -> None:
        with lock:
            left[0] -= 1
            if not left[0]:
                event.set()

    for future in pending:
        future.add_done_callback(one_finished)
    return event


def asked(call: Callable[[], Any]) -> Any:
    """``call()``, a short blocking distributed call (a round trip to the scheduler, such as
    ``client.nthreads()``), with Ctrl-C held: raised after it, not inside its wait.

    Examples
    --------
    >>> from distributed import Client
    >>> from pargraph.remote.waiting import asked
    >>> with Client(processes=False, n_workers=1, dashboard_address=None) as client:
    ...     len(asked(client.nthreads))
    1
    """
    with interrupts.deferred():
        return call()
