"""Nested tuples, lists and dicts (pytrees): leaves in PyTorch's order, the nesting rebuilt
around new leaves, and kinds registered as nodes."""

import random

import pytest

from pargraph.pytree import NodeKinds, flatten, node_kinds, unflatten

torch = pytest.importorskip("torch")  # the test extra installs the CPU build
from torch.utils import _pytree as their_pytree  # noqa: E402


def _nested(draw: random.Random, depth: int):
    """A random nesting of tuples, lists and dicts (string keys, in the order drawn) around
    numbers, strings and None."""
    kind = draw.choice(["leaf", "leaf", "tuple", "list", "dict"]) if depth else "leaf"
    if kind == "leaf":
        return draw.choice([draw.randint(-5, 5), draw.random(), "s", None, 0.0])
    items = [_nested(draw, depth - 1) for _ in range(draw.randint(0, 3))]
    if kind == "dict":
        keys = draw.sample("abcdefgh", len(items))
        return dict(zip(keys, items))
    return tuple(items) if kind == "tuple" else items


@pytest.mark.parametrize("seed", range(40))
def test_leaves_come_in_pytorchs_order_and_the_nesting_is_rebuilt(seed):
    value = _nested(random.Random(seed), 4)
    leaves, spec = flatten(value)
    theirs, _ = their_pytree.tree_flatten(value)
    assert leaves == theirs
    assert unflatten(spec, iter(leaves)) == value
    renamed = unflatten(spec, iter(range(len(leaves))))
    assert their_pytree.tree_flatten(renamed)[0] == list(range(len(leaves)))
    assert flatten(renamed)[1] == spec  # the same nesting, whatever its leaves


def test_a_registered_kind_flattens_into_its_children_and_comes_back():
    class Pair:
        def __init__(self, a, b):
            self.a, self.b = a, b

    kinds = NodeKinds()
    kinds.register(Pair, lambda p: ([p.a, p.b], "pair"), lambda _, c: Pair(*c))
    saved = dict(node_kinds.kinds)
    node_kinds.kinds.update(kinds.kinds)
    try:
        leaves, spec = flatten({"x": Pair(1, [2, 3])})
        assert leaves == [1, 2, 3]
        back = unflatten(spec, iter([4, 5, 6]))
        assert isinstance(back["x"], Pair) and back["x"].a == 4 and back["x"].b == [5, 6]
    finally:
        node_kinds.kinds.clear()
        node_kinds.kinds.update(saved)
    assert flatten(Pair(1, 2))[0][0].a == 1  # unregistered again: a leaf
