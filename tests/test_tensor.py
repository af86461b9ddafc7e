"""The Tensor API: factories, dtypes, attributes, conversions, repr, indexing, bad input."""

import math

import numpy as np
import pytest

import pargraph


def test_attributes():
    t = pargraph.ones(2, 3, 4)
    assert t.ndim == t.dim() == 3 and t.size(1) == 3 and t.size(-1) == 4
    assert t.numel() == 24 and len(t) == 2
    assert t.T.shape == (4, 3, 2) and pargraph.ones(2, 3).T.shape == (3, 2)
    assert pargraph.ones(2, 3).t().shape == (3, 2)


def test_conversions():
    t = pargraph.tensor([1.7, -2.2])
    assert t.double().dtype == np.float64 and t.long().tolist() == [1, -2]
    assert t.to(pargraph.float64).dtype == np.float64 and t.float() is t
    assert t.to("cpu") is t
    assert pargraph.tensor(3.5).item() == 3.5 and float(pargraph.tensor(2.5)) == 2.5
    assert int(pargraph.tensor(4)) == 4 and bool(pargraph.tensor(True))
    assert [4, 5, 6][pargraph.tensor(1)] == 5
    np.testing.assert_array_equal(np.asarray(pargraph.ones(2)), [1, 1])
    with pytest.raises(RuntimeError, match="a Tensor with 2 elements cannot be converted"):
        pargraph.ones(2).item()
    with pytest.raises(RuntimeError, match="Tensor with more than one value is ambiguous"):
        bool(pargraph.ones(2))
    with pytest.raises(RuntimeError, match="Use tensor.detach\\(\\).numpy\\(\\)"):
        pargraph.ones(2, requires_grad=True).numpy()


def test_clone_is_differentiable_and_independent():
    x = pargraph.tensor([1.0, 2.0], requires_grad=True)
    y = x.clone()
    assert y.grad_fn.name() == "CloneBackward0"
    y.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0]


def test_iteration_and_unbinding():
    rows = list(pargraph.arange(6).reshape(2, 3))
    assert [r.tolist() for r in rows] == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(TypeError, match="0-d tensor"):
        len(pargraph.tensor(1.0))


def test_reductions_with_dim_and_keepdim():
    a = np.arange(12.0).reshape(3, 4)
    t = pargraph.tensor(a)
    assert t.sum(1, keepdim=True).shape == (3, 1)
    values, indices = t.max(dim=1)
    assert values.tolist() == [3.0, 7.0, 11.0] and indices.tolist() == [3, 3, 3]
    values, indices = t.min(0, keepdim=True)
    assert values.shape == (1, 4) and indices.tolist() == [[0, 0, 0, 0]]
    assert t.argmax().item() == 11 and t.max().item() == 11.0
    assert pargraph.max(t, pargraph.full((4,), 5.0)).shape == (3, 4)
    np.testing.assert_allclose(t.std(1).numpy(), a.std(1, ddof=1))
    np.testing.assert_allclose(t.var(1, correction=0).numpy(), a.var(1))
    assert t.prod(0).tolist() == [0.0, 45.0, 120.0, 231.0]


@pytest.mark.parametrize(
    "build, error, message",
    [
        (lambda: pargraph.ones(5, 3) @ pargraph.ones(4, 2), RuntimeError,
         r"^matmul: shapes \(5, 3\) and \(4, 2\) cannot be multiplied$"),
        (lambda: pargraph.ones(3) + pargraph.ones(4), RuntimeError,
         r"^add: shapes \(3,\) and \(4,\) cannot be broadcast together"),
        (lambda: pargraph.ones(6).reshape(4, 2), RuntimeError,
         r"^reshape: shape '\[4, 2\]' is invalid for input of size 6$"),
        (lambda: pargraph.ones(2, 3).sum(2), IndexError,
         r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"),
        (lambda: pargraph.cat([pargraph.ones(2, 3), pargraph.ones(3, 2)]), RuntimeError,
         r"^cat: sizes of tensors must match except in dimension 0"),
        (lambda: pargraph.ones(3)[5], IndexError, r"index: index 5 is out of bounds"),
        (lambda: pargraph.ones(2).expand(3, 3), RuntimeError,
         r"^expand: shape \(2,\) cannot be expanded to \(3, 3\)$"),
        (lambda: pargraph.where(pargraph.ones(2), 1.0, 0.0), RuntimeError,
         r"^where: condition must be a bool tensor"),
        (lambda: pargraph.ones(2) + "a", TypeError, r"unsupported operand type: str"),
        (lambda: pargraph.tensor("abc"), TypeError, r"could not infer a numeric dtype"),
        (lambda: pargraph.ones(2, 2).permute(0, 0), RuntimeError, r"^permute: dims \(0, 0\)"),
    ],
)
def test_bad_input_raises_at_the_call_that_builds_the_node(build, error, message):
    with pytest.raises(error, match=message):
        build()


def test_shapes_are_inferred_without_computing():
    x = pargraph.ones(2, 3)
    y = (x @ pargraph.ones(3, 5)).sum(0).unsqueeze(0)
    assert y.shape == (1, 5) and y._node.value is None


def test_math_constants_flow_through():
    assert pargraph.tensor(math.pi).sin().item() == pytest.approx(0, abs=1e-6)
