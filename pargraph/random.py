"""``pargraph.random``: PyTorch's ``torch.random`` module, the generator's seeding and state,
and :func:`fork_rng`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from pargraph.factories import (  # noqa: F401  (torch.random holds them)
    Generator,
    get_rng_state,
    initial_seed,
    manual_seed,
    seed,
    set_rng_state,
)


@contextlib.contextmanager
def fork_rng(devices: Any = None, enabled: bool = True, _caller: str = "fork_rng",
             _devices_kw: str = "devices", device_type: Any = None) -> Iterator[None]:
    """Draws made inside the block leave the generator as it was before it.

    Examples
    --------
    >>> import pargraph
    >>> with pargraph.random.fork_rng():
    ...     _ = pargraph.rand(3)
    >>> state = pargraph.get_rng_state()
    """
    if not enabled:
        yield
        return
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)


__all__ = ["Generator", "fork_rng", "get_rng_state", "initial_seed", "manual_seed", "seed",
           "set_rng_state"]
