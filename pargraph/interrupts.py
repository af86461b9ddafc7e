"""Ctrl-C held back while training state changes: a step is applied whole or not at all.

A ``KeyboardInterrupt`` is raised by Python between any two bytecodes of the main thread. Arriving
while an optimizer points its parameters at their new values one by one, or while ``backward()``
accumulates into ``.grad`` tensors, it left some updated and others not, and arriving inside the
few lines that switch grad mode on and off, it left grad mode switched. :data:`interrupts` holds
a SIGINT that arrives inside a :meth:`~Interrupts.deferred` block and raises it when the
outermost block ends, so the change is complete first; long runs stay interruptible, since only
the Python that commits their results is deferred.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any

try:  # the C functions behind ``signal``'s, without its enum conversions (most of its cost)
    import _signal as raw_signal
except ImportError:  # pragma: no cover (an interpreter without it)
    raw_signal = signal


class Interrupts:
    """The process's SIGINT while a commit runs: held, then delivered to the handler that was
    installed before (Python's default raises ``KeyboardInterrupt``).

    Only the main thread receives signals, so blocks in other threads defer nothing; nor does a
    block when the handler is not a Python function (ignored, or the default action that ends
    the process, which tears nothing in it).

    Examples
    --------
    >>> from pargraph.interrupts import interrupts
    >>> with interrupts.deferred():
    ...     pass  # a Ctrl-C here is raised after the block
    """

    def __init__(self) -> None:
        self._depth = 0
        self._held: tuple[int, Any] | None = None
        self._previous: Any = None

    def deferred(self) -> _Deferred:
        """A context manager inside which a Ctrl-C waits for the block's end."""
        return _Deferred(self)

    def undo(self, change: Callable[[], Any]) -> None:
        """Run ``change`` to its end inside a deferred block, from an ``except`` clause that
        puts state back: a second Ctrl-C landing before the block begins runs it again from
        the start (so it must be safe to repeat), and is raised once it has ended.

        Examples
        --------
        >>> from pargraph.interrupts import interrupts
        >>> state = {"x": 1}
        >>> try:
        ...     state["x"] = 2
        ...     raise ValueError("the step failed")
        ... except ValueError:
        ...     interrupts.undo(lambda: state.update(x=1))
        >>> state
        {'x': 1}
        """
        done = interrupted = False
        while not done:
            try:
                with self.deferred():
                    change()
                    done = True
            except KeyboardInterrupt:
                interrupted = True
        if interrupted:
            raise KeyboardInterrupt

    def held(self) -> bool:
        """Whether a Ctrl-C is being held (a long wait inside a block may stop early for it,
        at a point where stopping is safe)."""
        return self._held is not None

    def _hold(self, signum: int, frame: Any) -> None:
        self._held = (signum, frame)

    def _enter(self) -> bool:
        if threading.current_thread() is not threading.main_thread():
            return False
        if self._depth:
            self._depth += 1
            return True
        previous = raw_signal.signal(signal.SIGINT, self._hold)
        if not callable(previous):  # ignored, or the default action: put it back
            raw_signal.signal(signal.SIGINT, previous)
            return False
        self._previous, self._held = previous, None
        self._depth = 1
        return True

    def _exit(self) -> None:
        self._depth -= 1
        if self._depth:
            return
        previous, self._previous = self._previous, None
        raw_signal.signal(signal.SIGINT, previous)
        held, self._held = self._held, None
        if held is not None:
            previous(*held)  # the default handler raises KeyboardInterrupt here


class _Deferred:
    """One ``with interrupts.deferred():`` block (a class: a generator-based context manager
    runs Python code, which a signal can interrupt, between its steps)."""

    __slots__ = ("owner", "entered")

    def __init__(self, owner: Interrupts) -> None:
        self.owner = owner
        self.entered = False

    def __enter__(self) -> None:
        self.entered = self.owner._enter()

    def __exit__(self, *exc_info: Any) -> None:
        if self.entered:
            self.entered = False
            self.owner._exit()


#: The process's one holder of SIGINT (signal handlers are per process).
interrupts = Interrupts()
