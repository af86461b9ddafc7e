"""Functions over tensors (``cat``, ``stack``, ``where``, ``compute``) and the function forms of
methods."""

import numpy as np
import pytest

import pargraph
from tests.test_semantics import TABLE, make


def test_split_chunk_stack_cat():
    t = pargraph.arange(10)
    assert [p.tolist() for p in t.split(4)] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert [p.tolist() for p in t.split([3, 7])] == [[0, 1, 2], [3, 4, 5, 6, 7, 8, 9]]
    assert [len(p) for p in t.chunk(3)] == [4, 4, 2]
    assert pargraph.cat([t, t]).shape == (20,)
    assert pargraph.stack([t, t], dim=1).shape == (10, 2)


def test_module_functions_and_methods_agree():
    t = pargraph.tensor([[0.5, -1.0], [2.0, 0.25]])
    for name in ["exp", "abs", "sin", "cos", "tanh", "sigmoid", "relu"]:
        assert getattr(pargraph, name)(t).tolist() == getattr(t, name)().tolist()
    assert pargraph.softmax(t, 1).tolist() == t.softmax(1).tolist()
    assert pargraph.sum(t, 0).tolist() == t.sum(0).tolist()
    assert pargraph.clamp(t, max=0.5).tolist() == t.clamp(max=0.5).tolist()


@pytest.mark.parametrize("a,b", [("int64", "float32"), ("int32", "float16"), ("bool", "int8"),
                                 ("uint8", "int8"), ("float16", "float64")])
def test_cat_stack_and_where_promote_like_pytorch(a, b):
    x, y = make(a), make(b)
    expected = np.dtype(TABLE[a, b])
    assert pargraph.cat([x, y]).dtype == expected
    assert pargraph.stack([x, y]).dtype == expected
    assert pargraph.where(pargraph.tensor([True, False]), x, y).dtype == expected
    assert (x * y).dtype == expected
    np.testing.assert_array_equal(pargraph.cat([x, y]).numpy(), np.ones(4, dtype=expected))
