"""Nested tuples, lists and dicts of values (PyTorch's and JAX's "pytrees"): their leaves in
order, and the same nesting rebuilt around new leaves. Compiled steps, checkpointed
functions and the ``pargraph.func`` transforms take and return such values."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

#: Where a leaf stands in a :func:`flatten` spec.
LEAF = object()


def flatten(value: Any) -> tuple[list, Any]:
    """The leaves of nested tuples, lists and dicts, and how to rebuild them.

    Examples
    --------
    >>> from pargraph.pytree import flatten, unflatten
    >>> leaves, spec = flatten({"a": (1, 2), "b": [3]})
    >>> leaves, unflatten(spec, iter([10, 20, 30]))
    ([1, 2, 3], {'a': (10, 20), 'b': [30]})
    """
    flat: list = []

    def walk(v: Any) -> Any:
        if type(v) in (tuple, list):
            return (type(v), [walk(item) for item in v])
        if type(v) is dict:
            return (dict, [(k, walk(item)) for k, item in v.items()])
        flat.append(v)
        return LEAF

    return flat, walk(value)


def unflatten(spec: Any, leaves: Iterator[Any]) -> Any:
    """The nesting ``spec`` (from :func:`flatten`) around the next values of ``leaves``."""
    if spec is LEAF:
        return next(leaves)
    kind, items = spec
    if kind is dict:
        return {k: unflatten(item, leaves) for k, item in items}
    return kind(unflatten(item, leaves) for item in items)
