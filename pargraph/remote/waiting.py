"""Waiting for a cluster in the calling thread with Ctrl-C held.

distributed's blocking calls (``Future.result``, ``wait``, ``Client.gather``) wait on a
``threading.Event`` for the client's event loop. A ``KeyboardInterrupt`` raised inside that
wait can leave the event's lock held, and the event loop's thread then blocks on it for good:
the next call never returns. :func:`settled` waits in slices with Ctrl-C held, and a held one
is raised between slices, once distributed's call has returned.
"""

from __future__ import annotations

import concurrent.futures
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
        while not _finished(futures):
            if interrupts.stopping():  # raised as the block ends
                break
        else:
            return then() if then is not None else None
    raise KeyboardInterrupt  # (where the block's end held it for an outer block)


def _finished(futures: list) -> bool:
    """Wait up to :data:`POLL` seconds; whether every future has finished. distributed's
    Futures, or ``concurrent.futures`` ones (a coroutine run on the client's event loop)."""
    if all(isinstance(f, concurrent.futures.Future) for f in futures):
        return not concurrent.futures.wait(futures, timeout=POLL).not_done
    from distributed import wait

    try:
        with futures[0].client.as_current():  # wait() asks for the default client
            wait(futures, timeout=POLL)
    except TimeoutError:
        return False
    return True
