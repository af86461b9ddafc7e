"""``Compiled``: a function compiled by ``pargraph.compile``, holding its programs by guards; a
call replays the first program whose guards hold, or captures a new one."""

from __future__ import annotations

import functools
import threading
import warnings
from collections.abc import Callable
from typing import Any

from pargraph.capturing import recording
from pargraph.compiler.capture import Capture
from pargraph.compiler.guards import concrete, name_of
from pargraph.compiler.program import Program
from pargraph.interrupts import interrupts
from pargraph.pytree import flatten

#: How many programs a compiled function keeps (``torch._dynamo.config.cache_size_limit``).
CACHE_SIZE = 8


class Compiled:
    """A function with its captured programs (see :func:`compile`)."""

    def __init__(self, fn: Callable, fullgraph: bool = False,
                 cache_size: int = CACHE_SIZE) -> None:
        self.fn, self.fullgraph, self.cache_size = fn, fullgraph, cache_size
        self.programs: list[Program] = []
        #: Why calls run eagerly (a graph break, or guards that keep failing), or None.
        self.eager: str | None = None
        self.captures = self.replays = 0
        self._lock = threading.Lock()
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.eager is not None or recording.recorder is not None:
            return self.fn(*args, **kwargs)  # inside another capture: part of it
        flat, spec = flatten((args, kwargs))
        failed = None
        with self._lock:
            for program in self.programs:
                bound = program.bind(flat, spec)
                if bound is not None:
                    self.replays += 1
                    return program.replay(bound, flat)
                failed = failed or program.failed
            if len(self.programs) >= self.cache_size:
                self.eager = (f"guard {failed} failed on each of the last {self.cache_size} "
                              "programs")
                warnings.warn(f"pargraph.compile: {name_of(self.fn)} captured "
                              f"{self.cache_size} programs (cache_size) and its {failed} "
                              "changes still: it runs eagerly from now on", stacklevel=2)
                return self.fn(*args, **kwargs)
            self.captures += 1
            return self._capture(flat, spec)

    def _capture(self, flat: list, spec: Any) -> Any:
        with interrupts.failsafe(), Capture(self, flat) as capture:
            result = capture.call(self.fn, spec)
            if capture.broken is not None:
                self.eager = f"graph break at {capture.broken}"
                return concrete(result)
            program, result = capture.finish(result)
        # Kept only once the capture has ended: a Ctrl-C inside the block rolls the call back,
        # and a program kept meanwhile would replay onto state it never produced. Settling
        # rebinds the optimizer's tensors one by one: a Ctrl-C waits until all are.
        with interrupts.deferred():
            for record in program.optimizers:
                record.settle()
            self.programs.insert(0, program)
        return result

    def __repr__(self) -> str:
        return f"pargraph.compile({name_of(self.fn)})"
