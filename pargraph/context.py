"""The process's mutable state in one named object: ``pargraph.context``.

Each room that remembers something between calls defines a class for it and registers one
instance here as it is imported (:meth:`Context.register`); the room's own name for it
(``pargraph.runtime.allocator``) is the same object, which its hot paths read directly. So
``pargraph.context.states()`` lists everything pargraph keeps in a process, and a forked child
resets, in one place, what cannot cross a fork: each state with an ``after_fork`` method
(helper threads, locks another thread held). This module imports nothing of pargraph's.
"""

from __future__ import annotations

import os
from typing import Any, TypeVar

State = TypeVar("State")


class Context:
    """Every state object of the process, by name.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.context.allocator is pargraph.runtime.allocator
    True
    >>> "grad_mode" in pargraph.context.states()
    True
    """

    def __init__(self) -> None:
        self._states: dict[str, Any] = {}

    def register(self, name: str, state: State) -> State:
        """Keep ``state`` under ``name`` (once per name) and return it."""
        if name in self._states:
            raise ValueError(f"pargraph.context: a state named {name!r} is registered already")
        self._states[name] = state
        return state

    def states(self) -> dict[str, Any]:
        """The registered states, by name, in the order their rooms were imported."""
        return dict(self._states)

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["_states"][name]
        except KeyError:
            raise AttributeError(f"pargraph.context has no state named {name!r}") from None

    def after_fork(self) -> None:
        """In a forked child: each state's ``after_fork``, in registration order."""
        for state in self._states.values():
            reset = getattr(type(state), "after_fork", None)
            if reset is not None:
                reset(state)

    def __repr__(self) -> str:
        return f"Context({', '.join(self._states)})"


context = Context()
os.register_at_fork(after_in_child=context.after_fork)
