"""Nested tuples, lists and dicts of values (PyTorch's and JAX's "pytrees"): their leaves in
order, and the same nesting rebuilt around new leaves. Compiled steps, checkpointed
functions and the ``pargraph.func`` transforms take and return such values. Other types join
as nodes with :meth:`NodeKinds.register` (a sparse tensor is its indices and values)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from pargraph.context import context

#: Where a leaf stands in a :func:`flatten` spec.
LEAF = object()


class NodeKinds:
    """The types flattened into children besides tuples, lists and dicts, as PyTorch's
    ``register_pytree_node`` and JAX's ``register_pytree_node`` register them."""

    def __init__(self) -> None:
        self.kinds: dict[type, tuple[Callable, Callable]] = {}

    def register(self, kind: type, to_children: Callable[[Any], tuple[list, Any]],
                 from_children: Callable[[Any, list], Any]) -> None:
        """Flatten a ``kind`` into ``to_children(value)``'s children, its context (compared
        as part of the spec) beside them; rebuild it with ``from_children(context,
        children)``.

        Examples
        --------
        >>> class Pair:
        ...     def __init__(self, a, b): self.a, self.b = a, b
        >>> kinds = NodeKinds()
        >>> kinds.register(Pair, lambda p: ([p.a, p.b], None), lambda _, c: Pair(*c))
        >>> Pair in kinds.kinds
        True
        """
        self.kinds[kind] = (to_children, from_children)


#: The registered kinds of this process.
node_kinds = context.register("pytree_kinds", NodeKinds())


def flatten(value: Any) -> tuple[list, Any]:
    """The leaves of nested tuples, lists, dicts and registered kinds, and how to rebuild them.

    Examples
    --------
    >>> from pargraph.pytree import flatten, unflatten
    >>> leaves, spec = flatten({"a": (1, 2), "b": [3]})
    >>> leaves, unflatten(spec, iter([10, 20, 30]))
    ([1, 2, 3], {'a': (10, 20), 'b': [30]})
    """
    flat: list = []
    kinds = node_kinds.kinds

    def walk(v: Any) -> Any:
        if type(v) in (tuple, list):
            return (type(v), [walk(item) for item in v])
        if type(v) is dict:
            return (dict, [(k, walk(item)) for k, item in v.items()])
        if type(v) in kinds:
            children, context = kinds[type(v)][0](v)
            return (type(v), [walk(item) for item in children], context)
        flat.append(v)
        return LEAF

    return flat, walk(value)


def unflatten(spec: Any, leaves: Iterator[Any]) -> Any:
    """The nesting ``spec`` (from :func:`flatten`) around the next values of ``leaves``."""
    if spec is LEAF:
        return next(leaves)
    kind, items = spec[0], spec[1]
    if kind is dict:
        return {k: unflatten(item, leaves) for k, item in items}
    if len(spec) == 3:
        return node_kinds.kinds[kind][1](spec[2], [unflatten(item, leaves) for item in items])
    return kind(unflatten(item, leaves) for item in items)
