"""The Tensor API: factories, dtypes, attributes, conversions, repr, indexing, bad input."""

import math

import numpy as np
import pytest

import pargraph


def test_python_floats_default_to_float32_and_ints_to_int64():
    assert pargraph.tensor(2.0).dtype == pargraph.float32
    assert pargraph.tensor([1, 2]).dtype == pargraph.int64
    assert pargraph.tensor([True]).dtype == pargraph.bool
    assert pargraph.tensor(np.arange(3.0)).dtype == pargraph.float64  # numpy keeps its dtype
    assert pargraph.tensor([1, 2], dtype=pargraph.float64).dtype == np.float64


@pytest.mark.parametrize(
    "make, shape, dtype, values",
    [
        (lambda: pargraph.zeros(2, 3), (2, 3), np.float32, np.zeros((2, 3))),
        (lambda: pargraph.zeros((2, 3)), (2, 3), np.float32, np.zeros((2, 3))),
        (lambda: pargraph.ones(4, dtype=pargraph.int64), (4,), np.int64, np.ones(4)),
        (lambda: pargraph.full((2,), 1.5), (2,), np.float32, [1.5, 1.5]),
        (lambda: pargraph.full((2,), True), (2,), np.bool_, [True, True]),
        (lambda: pargraph.arange(5), (5,), np.int64, np.arange(5)),
        (lambda: pargraph.arange(1, 2, 0.5), (2,), np.float32, [1.0, 1.5]),
        (lambda: pargraph.linspace(0, 1, 5), (5,), np.float32, np.linspace(0, 1, 5)),
        (lambda: pargraph.eye(3), (3, 3), np.float32, np.eye(3)),
        (lambda: pargraph.eye(2, 3), (2, 3), np.float32, np.eye(2, 3)),
        (lambda: pargraph.zeros_like(pargraph.ones(2, dtype=pargraph.float64)), (2,), np.float64,
         [0, 0]),
        (lambda: pargraph.ones_like(pargraph.zeros(2, 2)), (2, 2), np.float32, np.ones((2, 2))),
        (lambda: pargraph.full_like(pargraph.zeros(3), 7), (3,), np.float32, [7, 7, 7]),
        (lambda: pargraph.from_numpy(np.arange(3, dtype=np.float64)), (3,), np.float64,
         [0, 1, 2]),
    ],
)
def test_factories(make, shape, dtype, values):
    t = make()
    assert t.shape == shape and t.size() == shape and t.dtype == dtype
    np.testing.assert_allclose(t.numpy(), values)


def test_random_factories_are_seeded_by_manual_seed():
    pargraph.manual_seed(7)
    first = [pargraph.rand(3).tolist(), pargraph.randn(2, 2).tolist(),
             pargraph.randint(0, 10, (5,)).tolist(), pargraph.randint(4, (2,)).tolist()]
    pargraph.manual_seed(7)
    second = [pargraph.rand(3).tolist(), pargraph.randn(2, 2).tolist(),
              pargraph.randint(0, 10, (5,)).tolist(), pargraph.randint(4, (2,)).tolist()]
    assert first == second
    x = pargraph.rand(1000)
    assert 0 <= x.min().item() and x.max().item() < 1
    assert abs(pargraph.randn(10000).mean().item()) < 0.05
    assert pargraph.randint(3, 5, (100,)).min().item() >= 3
    assert pargraph.rand_like(pargraph.zeros(2, dtype=pargraph.float64)).dtype == np.float64
    assert pargraph.randn_like(pargraph.zeros(4, 2)).shape == (4, 2)


def test_from_numpy_shares_memory():
    array = np.zeros(3)
    t = pargraph.from_numpy(array)
    array[0] = 5
    assert t.tolist() == [5.0, 0.0, 0.0]


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


@pytest.mark.parametrize(
    "make, text",
    [
        (lambda: pargraph.tensor(5.0, requires_grad=True) ** 2,
         "tensor(25., grad_fn=<PowBackward0>)"),
        (lambda: pargraph.tensor([1.0, 2.0, 3.0]), "tensor([1., 2., 3.])"),
        (lambda: pargraph.tensor([0.1, -2.0]), "tensor([ 0.1000, -2.0000])"),
        (lambda: pargraph.tensor(2.5), "tensor(2.5000)"),
        (lambda: pargraph.tensor([1, 2]), "tensor([1, 2])"),
        (lambda: pargraph.tensor([True, False]), "tensor([ True, False])"),
        (lambda: pargraph.ones(2, requires_grad=True), "tensor([1., 1.], requires_grad=True)"),
        (lambda: pargraph.ones(1, dtype=pargraph.float64), "tensor([1.], dtype=pargraph.float64)"),
        (lambda: pargraph.zeros(0), "tensor([])"),
        (lambda: pargraph.tensor([[1.0, -1.0], [0.5, 2.0]]),
         "tensor([[ 1.0000, -1.0000],\n        [ 0.5000,  2.0000]])"),
        (lambda: pargraph.tensor([float("inf"), 1.0]), "tensor([inf, 1.])"),
    ],
)
def test_repr_matches_pytorch(make, text):
    assert repr(make()) == text


def test_indexing_matches_numpy():
    a = np.arange(24.0).reshape(2, 3, 4)
    t = pargraph.tensor(a)
    for key in [0, -1, (1, 2), (slice(None), 1), (Ellipsis, 0), (None, 0), (0, slice(1, None, 2)),
                ([1, 0],), (slice(None), [2, 0, 2])]:
        np.testing.assert_array_equal(t[key].numpy(), a[key])
    mask = a[0, 0] > 1
    np.testing.assert_array_equal(t[:, :, pargraph.tensor(mask)].numpy(), a[:, :, mask])
    np.testing.assert_array_equal(t[t > 20].numpy(), a[a > 20])
    np.testing.assert_array_equal(t[pargraph.tensor([1, 1])].numpy(), a[[1, 1]])


def test_indexing_gradient_accumulates_repeated_indices():
    x = pargraph.zeros(3, requires_grad=True)
    x[pargraph.tensor([0, 2, 2])].sum().backward()
    assert x.grad.tolist() == [1.0, 0.0, 2.0]


def test_split_chunk_stack_cat():
    t = pargraph.arange(10)
    assert [p.tolist() for p in t.split(4)] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert [p.tolist() for p in t.split([3, 7])] == [[0, 1, 2], [3, 4, 5, 6, 7, 8, 9]]
    assert [len(p) for p in t.chunk(3)] == [4, 4, 2]
    assert pargraph.cat([t, t]).shape == (20,)
    assert pargraph.stack([t, t], dim=1).shape == (10, 2)


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


def test_module_functions_and_methods_agree():
    t = pargraph.tensor([[0.5, -1.0], [2.0, 0.25]])
    for name in ["exp", "abs", "sin", "cos", "tanh", "sigmoid", "relu"]:
        assert getattr(pargraph, name)(t).tolist() == getattr(t, name)().tolist()
    assert pargraph.softmax(t, 1).tolist() == t.softmax(1).tolist()
    assert pargraph.sum(t, 0).tolist() == t.sum(0).tolist()
    assert pargraph.clamp(t, max=0.5).tolist() == t.clamp(max=0.5).tolist()


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
