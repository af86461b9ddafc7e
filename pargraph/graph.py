"""The node graph: what every tensor operation records.

A :class:`Node` is one operation applied to its inputs. Its op, inputs, attributes, shape and
dtype never change after construction; only the *value slot* does (empty, then a realized numpy
array or a cluster Future) and, once a node is realized and no longer needed by autograd, its
inputs are cut so that old values can be garbage collected.

Autograd bookkeeping lives here too because it is per node: ``requires_grad``, ``history``
(the node was recorded with grad enabled from an input that requires grad, so it has a
``grad_fn``), and a weak reference to the tensor that owns a leaf's ``.grad``.

The recording context is here too, per thread: which phase and module new nodes belong to
(:func:`naming`, :func:`module_scope`), whether they record autograd history (``grad_mode``,
switched by :mod:`pargraph.autograd.mode`) and which source line they carry
(:func:`recorded_at`). Ops read it when they record a node.

Traversals are iterative so that graphs of 100,000+ nodes never hit Python's recursion limit.
"""

from __future__ import annotations

import itertools
import os
import secrets
import sys
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from pargraph.context import context

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_uids = itertools.count()
# Keys are global on a dask scheduler that several client processes may share.
_SESSION = secrets.token_hex(4)

#: Phases of a node, used for naming tasks and for traces.
FORWARD, BACKWARD, ACCUMULATE, UPDATE = "forward", "backward", "accumulate", "update"

#: A node's lifecycle, named as dask's ``local.py`` names its task states:
#: ``waiting``: recorded, no value yet (it runs with the next realization that needs it);
#: ``realized``: its value is in the slot, and it keeps its inputs, which autograd may need;
#: ``cut``: realized, inputs dropped: it holds its value only (a leaf, an updated parameter);
#: ``freed``: a backward went through it, its saved values are gone (a second backward
#: raises); it still holds a value a tensor wraps.
WAITING, REALIZED, CUT, FREED = "waiting", "realized", "cut", "freed"


class _Naming(threading.local):
    """Per-thread naming context: which phase new nodes belong to, and on whose behalf."""

    phase = FORWARD
    origin: str | None = None
    scope: str = ""  # dotted path of the nn.Module whose forward records the node
    model: str = ""  # the class of the outermost module called last: names one-task runs


naming_state = context.register("naming", _Naming())


def recording_phase() -> str:
    """The phase this thread's new nodes belong to (:data:`FORWARD` outside a backward)."""
    return naming_state.phase


class _GradMode(threading.local):
    """Whether new nodes record autograd history (per thread, as in PyTorch). The state of
    the recording context; :mod:`pargraph.autograd.mode` is its API (``no_grad`` & co.).

    ``site`` overrides the recorded source line: nodes a vjp emits carry the line that
    recorded their forward node, which is what an error should point at (and is cheaper than
    walking the stack).
    """

    enabled = True
    site = None


grad_mode = context.register("grad_mode", _GradMode())


class recorded_at:  # noqa: N801 (a context manager)
    """Nodes recorded inside the block carry ``site`` as their source line (one stack walk
    for many nodes: an optimizer step's updates all point at the user's ``step()`` call). The
    blocks here are classes: a generator-based context manager costs several times as much,
    and the backward pass enters one per node."""

    __slots__ = ("site", "saved")

    def __init__(self, site: Any) -> None:
        self.site = site

    def __enter__(self) -> None:
        self.saved = grad_mode.site
        grad_mode.site = self.site

    def __exit__(self, *exc_info: Any) -> None:
        grad_mode.site = self.saved


class naming:  # noqa: N801 (a context manager)
    """Record the nodes created inside the block as belonging to ``phase`` (on behalf of
    ``origin``, e.g. the forward op whose gradient they compute, inside module ``scope``)."""

    __slots__ = ("phase", "origin", "scope", "saved")

    def __init__(self, phase: str, origin: str | None = None, scope: str | None = None) -> None:
        self.phase, self.origin, self.scope = phase, origin, scope

    def __enter__(self) -> None:
        self.saved = (naming_state.phase, naming_state.origin, naming_state.scope)
        naming_state.phase, naming_state.origin = self.phase, self.origin
        if self.scope is not None:
            naming_state.scope = self.scope

    def __exit__(self, *exc_info: Any) -> None:
        naming_state.phase, naming_state.origin, naming_state.scope = self.saved


class module_scope:  # noqa: N801 (a context manager)
    """Nodes recorded inside the block belong to the module at ``path``."""

    __slots__ = ("path", "saved")

    def __init__(self, path: str) -> None:
        self.path = path

    def __enter__(self) -> None:
        self.saved = naming_state.scope
        naming_state.scope = self.path

    def __exit__(self, *exc_info: Any) -> None:
        naming_state.scope = self.saved


def last_model() -> str:
    """The class name of the outermost module this thread called last (``""``: none)."""
    return naming_state.model


def task_prefix(op_name: str, phase: str, origin: str | None) -> str:
    """The readable part of a task key; ``dask.utils.key_split`` returns exactly this."""
    if phase == FORWARD:
        return op_name
    if phase == BACKWARD:
        return f"{origin or op_name}_backward"
    if phase == ACCUMULATE:
        return "accumulate_grad"
    return f"{origin or op_name}_update"


def user_site() -> tuple[Any, int] | None:
    """The innermost stack frame outside pargraph, as (code object, line number).

    Storing the code object rather than the frame keeps no local variables alive.
    """
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
    if frame is None:
        return None
    return frame.f_code, frame.f_lineno


def user_stacklevel() -> int:
    """The ``stacklevel`` at which a ``warnings.warn`` in the calling function names the
    innermost line outside pargraph (the user's, however many of pargraph's calls between)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    return level


def in_package(function: Any) -> bool:
    """Whether ``function`` is pargraph's own code (not a line the user wrote)."""
    code = getattr(function, "__code__", None)
    return code is not None and code.co_filename.startswith(_PACKAGE_DIR)


def format_site(site: tuple[Any, int] | None) -> str:
    """``'File "train.py", line 12, in step'`` for a site from :func:`user_site`."""
    if site is None:
        return "<unknown>"
    code, line = site
    return f'File "{code.co_filename}", line {line}, in {code.co_name}'


class Node:
    """One recorded operation: ``op(*inputs, **attrs)`` with a static shape and dtype.

    ``inputs`` holds Nodes and plain Python scalars (scalars stay "weak" for dtype promotion,
    as in PyTorch). ``value`` is ``None`` until the node is realized.
    """

    __slots__ = (
        "op", "inputs", "attrs", "shape", "dtype", "key", "phase", "site", "value",
        "requires_grad", "history", "freed", "owner", "retains_grad", "scope", "overwritten",
        "uid", "grad_name", "hooks", "context", "__weakref__",
    )

    def __init__(self, op, inputs: tuple, attrs: dict, shape: tuple, dtype: np.dtype,
                 value: Any = None, site=None, naming: tuple[str, str, str] | None = None
                 ) -> None:
        if naming is None:  # read from this thread's naming context
            phase = naming_state.phase
            naming = (phase, task_prefix(op.name, phase, naming_state.origin), naming_state.scope)
        self.op = op
        self.inputs = inputs
        self.attrs = attrs
        self.shape = shape
        self.dtype = dtype
        self.phase, prefix, self.scope = naming
        self.uid = uid = next(_uids)  # increasing: what a block of code created is a range
        self.grad_name = None  # PyTorch's name for a composite's result (MeanBackward0)
        self.hooks: list | None = None  # Tensor.register_hook: applied to this node's gradient
        # A custom op's or autograd.Function's context (what its backward reads): held by
        # its node, so it goes with the node.
        self.context: Any = None
        self.key = f"{prefix}-{uid}-{_SESSION}"
        self.site = site
        self.value = value
        self.requires_grad = False
        self.history = False
        self.freed = False
        self.owner = None
        self.retains_grad = False
        # An in-place op replaced this value in its tensor (PyTorch bumps the version
        # counter): False, or the uid from which nodes are that op's own (their use of the
        # old value is the op's, which PyTorch keeps for it). A backward through an earlier
        # node that needs the old value raises, as in PyTorch.
        self.overwritten: int | bool = False

    @classmethod
    def replayed(cls, op, inputs: tuple, attrs: dict, shape: tuple, dtype: np.dtype,
                 phase: str, prefix: str, scope: str, site, value: Any = None) -> Node:
        """A node whose naming (``phase``, key ``prefix``, ``scope``) is given rather than read
        from the naming context: for graphs instantiated from a template."""
        return cls(op, inputs, attrs, shape, dtype, value, site, (phase, prefix, scope))

    def backward_name(self) -> str:
        """What PyTorch calls this node's grad_fn (``MulBackward0``, ``MeanBackward1``)."""
        return self.grad_name or self.op.grad_name

    def key_prefix(self) -> str:
        """The readable part of the key (see :func:`task_prefix`)."""
        return self.key.rsplit("-", 2)[0]

    @property
    def state(self) -> str:
        """``waiting``, ``realized``, ``cut`` or ``freed`` (see the module's constants)."""
        if self.freed:
            return FREED
        if self.value is None:
            return WAITING
        return REALIZED if self.inputs else CUT

    def realize(self, value: Any, keep_inputs: bool) -> None:
        """waiting -> realized (or cut, when nothing can need the inputs any more)."""
        self.value = value
        if not keep_inputs:
            self.inputs = ()

    def free(self, keep_value: bool) -> None:
        """-> freed: a backward went through it; its value stays only if somebody holds it."""
        self.freed = True
        if not keep_value:
            self.value = None

    def cut(self) -> None:
        """Drop the inputs, so the values they hold can be garbage collected."""
        self.inputs = ()

    def owner_tensor(self) -> Any:
        """The tensor that last wrapped this node, if it is still alive."""
        return self.owner() if self.owner is not None else None

    def input_nodes(self) -> Iterator[Node]:
        return (i for i in self.inputs if isinstance(i, Node))

    def __repr__(self) -> str:
        return f"<Node {self.key} {self.shape} {self.dtype}>"


def keep_hooks(old: Node, new: Node) -> None:
    """``new`` replaces leaf ``old`` under its tensor (an update, ``.data =``, a replay's
    landing): it takes ``old``'s ``register_hook`` hooks, as a PyTorch leaf keeps them. The
    same list, so the handles still remove them."""
    if old.hooks and not new.history and new.hooks is None:
        new.hooks = old.hooks


def renew_all(leaves: list[Node], values: list) -> None:
    """Each of ``leaves``, which nothing but its tensor refers to, takes its value in
    ``values`` as a new leaf would (a new serial number, and a leaf's key): what a compiled
    step's replay does to its parameters instead of making a node per parameter per step."""
    session = _SESSION
    for node, value in zip(leaves, values):
        node.value = value
        node.uid = uid = next(_uids)
        node.key = f"leaf-{uid}-{session}"


_MISSING = object()


class StructureCache:
    """What was derived from a graph structure (a partition, a backward template), by that
    structure: a training loop records the same structure every step. Bounded, least
    recently used first out, safe to share between threads; counts hits and misses."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.entries: OrderedDict = OrderedDict()
        self.hits = self.misses = 0
        self._lock = threading.Lock()

    def get(self, key: Any, default: Any = None) -> Any:
        with self._lock:
            found = self.entries.get(key, _MISSING)
            if found is _MISSING:
                self.misses += 1
                return default
            # Most recently used last, under the key stored first: the caller's key (a tuple
            # per node of a step) dies now. Stored in its place, it lived until the next
            # step: a branchy step had 4,378 new objects for the garbage collector to walk
            # when its run started, 3,178 without them.
            self.entries.move_to_end(key)
            self.hits += 1
            return found

    def put(self, key: Any, value: Any) -> None:
        with self._lock:
            while self.entries and len(self.entries) >= self.size:
                self.entries.popitem(last=False)
            self.entries[key] = value

    def clear(self) -> None:
        with self._lock:
            self.entries.clear()


#: ``Node.overwritten`` of a value replaced by no op of the graph (``.data =``, a compiled
#: step's landing): no use of the old value is the replacement's own.
REPLACED_OUTRIGHT = sys.maxsize


def uid_mark() -> int:
    """A number below the uid of every node created after this call, above every earlier
    one (it uses up one uid)."""
    return next(_uids)


def toposort(roots: Iterable[Node], stop=None) -> list[Node]:
    """Nodes reachable from ``roots`` (through inputs), inputs before consumers.

    Iterative depth-first search; nodes for which ``stop(node)`` is true are included but
    their inputs are not visited. It runs twice per training step over every node of the
    step: nodes hash by identity, so the set holds them (no ``id()`` call per edge).
    """
    order: list[Node] = []
    visited: set[Node] = set()
    visit = visited.add
    for root in roots:
        if root in visited:
            continue
        visit(root)
        # Each entry holds an iterator over the node's inputs: it resumes where it left off.
        stack = [(root, iter(() if stop is not None and stop(root) else root.inputs))]
        while stack:
            node, inputs = stack[-1]
            for child in inputs:
                if type(child) is Node and child not in visited:
                    visit(child)
                    stack.append((child, iter(() if stop is not None and stop(child)
                                              else child.inputs)))
                    break
            else:
                stack.pop()
                order.append(node)
    return order
