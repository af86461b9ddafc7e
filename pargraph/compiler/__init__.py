"""``pargraph.compile``: capture a training step (or a module's forward) once and replay it.

The rooms, from the bottom: :mod:`~pargraph.compiler.record` (what a capture saw, as data),
:mod:`~pargraph.compiler.guards` (what must hold for a replay),
:mod:`~pargraph.compiler.writes` (where a program's values come from and go),
:mod:`~pargraph.compiler.tasks` (what its tasks run), :mod:`~pargraph.compiler.program` (a
captured call: bind, run, land), :mod:`~pargraph.compiler.capture` (the recorder of the first
call), :mod:`~pargraph.compiler.step` (a compiled function's programs by guards) and
:mod:`~pargraph.compiler.module` (``pargraph.compile(model)``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from pargraph.compiler.guards import GraphBreak as GraphBreak
from pargraph.compiler.module import OptimizedModule
from pargraph.compiler.step import CACHE_SIZE, Compiled
from pargraph.nn.module import Module


def compile(fn: Callable | Module | None = None, *, fullgraph: bool = False,  # noqa: A001
            cache_size: int = CACHE_SIZE, dynamic: Any = None, backend: Any = None,
            mode: Any = None, options: Any = None, disable: bool = False) -> Any:
    """Capture ``fn`` (a training step, or a Module) on its first call and replay it after.

    The first call runs ``fn`` and records everything it does to tensors as one graph: its
    forward, ``backward()``, ``optimizer.step()``, the ``.grad`` it leaves, the tensors it
    returns. Later calls whose guards hold (argument shapes, dtypes and ``requires_grad``,
    grad mode, the modules' ``training``, the optimizer's state layout) run that graph on the
    new arguments and the current parameters, with no Python of the step's own. Learning
    rates, step counts and Python numbers passed as arguments are inputs: a scheduler
    changing ``lr`` does not capture again. Dropout draws its masks anew at every call, from
    the same generator, so compiled and eager training give the same numbers. A replay
    writes each parameter and optimizer state of 1 MiB or more into its own array, after the
    rest of the step has succeeded, unless something else holds that array
    (``pargraph.in-place-bytes``; see :mod:`pargraph.in_place`).

    Python side effects (``print``, appending to a list, reading a global) happen only while
    capturing, as with ``jax.jit``::

        @pargraph.compile
        def step(x, y):
            print("capturing")          # printed once, not at every step
            ...

    Reading a value in the middle (``loss.item()``, ``print(loss)``, ``if loss > 1``) is a
    graph break, and so is a learning-rate scheduler's ``step()`` inside ``fn`` (a replay
    would not move the rate again: call it after): the function then runs eagerly, and a
    warning names the line
    (``fullgraph=True`` raises :class:`GraphBreak` there instead). Tensors the function
    returns are new tensors without autograd history. ``dynamic``, ``backend``, ``mode`` and
    ``options`` are accepted for PyTorch's signature and ignored; ``disable=True`` returns
    ``fn`` itself.

    Examples
    --------
    >>> import pargraph
    >>> w = pargraph.tensor([1.0, 2.0], requires_grad=True)
    >>> opt = pargraph.optim.SGD([w], lr=0.1)
    >>> @pargraph.compile
    ... def step(x):
    ...     opt.zero_grad()
    ...     loss = (w * x).sum()
    ...     loss.backward()
    ...     opt.step()
    ...     return loss
    >>> [round(step(pargraph.tensor([1.0, 1.0])).item(), 2) for _ in range(3)]
    [3.0, 2.8, 2.6]
    """
    if fn is None:
        return functools.partial(compile, fullgraph=fullgraph, cache_size=cache_size,
                                 disable=disable)
    if disable:
        return fn
    if isinstance(fn, Module):
        return OptimizedModule(fn, fullgraph=fullgraph, cache_size=cache_size)
    return Compiled(fn, fullgraph=fullgraph, cache_size=cache_size)
