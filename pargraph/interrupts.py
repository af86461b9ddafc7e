"""Ctrl-C held back while training state changes: a step is applied whole or not at all.

A ``KeyboardInterrupt`` is raised by Python between any two bytecodes of the main thread. Arriving
while an optimizer points its parameters at their new values one by one, or while ``backward()``
accumulates into ``.grad`` tensors, it left some updated and others not, and arriving inside the
few lines that switch grad mode on and off, it left grad mode switched. :data:`interrupts` holds
a SIGINT that arrives inside a :meth:`~Interrupts.deferred` block and raises it when the
outermost block ends, so the change is complete first; long runs stay interruptible, since only
the Python that commits their results is deferred. Work that puts state back when it fails runs
in a :meth:`~Interrupts.failsafe` block: Ctrl-C stops the work at once, and a second one waits
until the putting back has ended.
"""

from __future__ import annotations

import signal
import sys
import threading
from typing import Any

from pargraph.context import context

try:  # the C functions behind ``signal``'s, without its enum conversions (most of its cost)
    import _signal as raw_signal
except ImportError:  # pragma: no cover (an interpreter without it)
    raw_signal = signal


class Interrupts:
    """The process's SIGINT while state changes: held, or passed on to the handler that was
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
        self._depth = 0  # blocks open in the main thread, of both kinds
        self._deferring = 0  # deferred blocks among them
        self._base: BaseException | None = None  # handled when the outermost block began
        self._held: tuple[int, Any] | None = None
        self._previous: Any = None

    def deferred(self) -> _Block:
        """A context manager inside which a Ctrl-C waits for the block's end."""
        return _Block(self, 1)

    def failsafe(self) -> _Block:
        """A context manager for work that puts state back when it fails: a Ctrl-C inside the
        block is raised at once, but once the block fails (by Ctrl-C or any error), what runs
        because it failed — its ``except`` and ``finally`` clauses and the ``__exit__`` of
        each ``with`` it leaves, Python code that runs while an exception is handled — holds
        a second Ctrl-C until the block ends, so the putting back runs to its end. A Ctrl-C
        held while the block swallows an error of its own waits for the block's end too.

        Examples
        --------
        >>> from pargraph.interrupts import interrupts
        >>> state = {"x": 1}
        >>> try:
        ...     with interrupts.failsafe():
        ...         try:
        ...             state["x"] = 2
        ...             raise ValueError("the step failed")
        ...         except BaseException:
        ...             state["x"] = 1  # a second Ctrl-C here waits for the block's end
        ...             raise
        ... except ValueError:
        ...     pass
        >>> state
        {'x': 1}
        """
        return _Block(self, 0)

    def stopping(self) -> bool:
        """Whether a long wait inside a deferred block should stop early, at a point where
        stopping is safe, by raising ``KeyboardInterrupt``: a Ctrl-C is held, and no other
        deferred block is open (stopping inside one would cut its commit short)."""
        return self._held is not None and self._deferring <= 1

    def _handle(self, signum: int, frame: Any) -> None:
        """The SIGINT handler while a block is open: hold the signal inside a deferred block,
        in the blocks' own bookkeeping (or code it calls, such as a trace function), and
        wherever an exception is handled that was not already handled when the outermost block
        began (a failure's cleanup); pass it on elsewhere."""
        if self._deferring or self._previous is None or sys.exc_info()[1] is not self._base \
                or _in_own_code(frame):
            self._held = (signum, frame)
            return
        self._held = None
        self._previous(signum, frame)

    def _enter(self, deferring: int) -> bool:
        if threading.current_thread() is not threading.main_thread():
            return False
        if self._depth:
            self._depth += 1
            self._deferring += deferring
            return True
        self._held = None
        previous = raw_signal.signal(signal.SIGINT, self._handle)
        if not callable(previous):  # ignored, or the default action: put it back
            raw_signal.signal(signal.SIGINT, previous)
            return False
        self._previous, self._base = previous, sys.exc_info()[1]
        self._deferring = deferring
        self._depth = 1
        return True

    def _exit(self, deferring: int) -> None:
        self._depth -= 1
        self._deferring -= deferring
        if self._depth:
            if self._held is not None and not self._deferring and \
                    sys.exc_info()[1] is self._base:  # back in a failsafe block's own work
                held, self._held = self._held, None
                self._previous(*held)
            return
        previous, self._previous, self._base = self._previous, None, None
        raw_signal.signal(signal.SIGINT, previous)
        held, self._held = self._held, None
        if held is not None:
            previous(*held)  # the default handler raises KeyboardInterrupt here


class _Block:
    """One ``with interrupts.deferred():`` or ``with interrupts.failsafe():`` block (a class: a
    generator-based context manager runs Python code, which a signal can interrupt, between
    its steps)."""

    __slots__ = ("owner", "deferring", "entered")

    def __init__(self, owner: Interrupts, deferring: int) -> None:
        self.owner = owner
        self.deferring = deferring
        self.entered = False

    def __enter__(self) -> None:
        self.entered = self.owner._enter(self.deferring)

    def __exit__(self, *exc_info: Any) -> None:
        if self.entered:
            self.entered = False
            self.owner._exit(self.deferring)


#: The code of the blocks' own bookkeeping, where a signal is always held.
_OWN_CODE = frozenset(f.__code__ for f in (Interrupts._handle, Interrupts._enter, Interrupts._exit,
                                           _Block.__enter__, _Block.__exit__))


def _in_own_code(frame: Any) -> bool:
    """Whether ``frame`` (where a signal landed) or a frame that called it is the blocks' own
    bookkeeping."""
    while frame is not None:
        if frame.f_code in _OWN_CODE:
            return True
        frame = frame.f_back
    return False


#: The process's one holder of SIGINT (signal handlers are per process).
interrupts = context.register("interrupts", Interrupts())
