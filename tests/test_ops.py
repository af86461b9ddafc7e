"""Every registered op: forward against numpy, gradients against finite differences (float64).

The table drives three tests: forward values, first derivatives (``gradcheck``), and a
coverage test that fails when a registered primitive appears in no row's forward or backward
graph, so a new op cannot land without a test.
"""

import dask
import numpy as np
import pytest

import pargraph
from pargraph import ops
from pargraph.autograd.backward_graph import history_region
from pargraph.graph import toposort
from tests.conftest import THROUGH_THE_SCHEDULER
from tests.op_table import CASES, tensors_of


@pytest.fixture(params=["sync", "threads"])
def local_scheduler(request):
    """The per-op tests run on the local schedulers; every op on the cluster is one test
    (below), one run for all of them instead of one per op and test."""
    with dask.config.set(scheduler=request.param, **THROUGH_THE_SCHEDULER):
        yield request.param


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_forward_matches_numpy(case, local_scheduler):
    out = case.fn(*tensors_of(case, requires_grad=False))
    expected = np.asarray(case.ref(*case.inputs))
    assert out.shape == expected.shape
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6, atol=1e-6)
    if expected.dtype.kind == "f" and all(a.dtype == np.float64 for a in case.inputs):
        assert out.dtype == expected.dtype or case.name.startswith("cast")


@pytest.mark.parametrize("case", [c for c in CASES if c.differentiable], ids=lambda c: c.name)
def test_gradients_match_finite_differences(case, local_scheduler):
    inputs = tensors_of(case, requires_grad=True)
    assert pargraph.autograd.gradcheck(case.fn, inputs, eps=case.eps, atol=case.atol)


def test_every_op_and_its_gradient_compute_the_same_on_the_cluster(local_client):
    """All the table's forward values and gradients (weighted by fixed numbers), computed in
    one run on an in-process cluster, equal those computed by the sync scheduler."""
    results = {}
    for name, settings in (("sync", {"scheduler": "sync"}),
                           ("cluster", {"scheduler": local_client})):
        values = []
        with dask.config.set(**settings, **THROUGH_THE_SCHEDULER):
            for case in CASES:
                inputs = tensors_of(case, requires_grad=case.differentiable)
                out = case.fn(*inputs)
                values.append(out.detach())
                if case.differentiable and out.requires_grad:
                    weights = pargraph.tensor(np.linspace(0.5, 1.5, out.numel())
                                              .reshape(tuple(out.shape)))
                    grads = pargraph.autograd.grad((out * weights).sum(),
                                                   [x for x in inputs if x.requires_grad],
                                                   allow_unused=True)
                    values += [g for g in grads if g is not None]
            results[name] = [v.numpy() for v in pargraph.compute(*values)]
    assert len(results["sync"]) == len(results["cluster"]) > len(CASES)
    for a, b in zip(results["sync"], results["cluster"]):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("case", [c for c in CASES if not c.differentiable], ids=lambda c: c.name)
def test_non_differentiable_ops_do_not_track_grad(case):
    out = case.fn(*tensors_of(case, requires_grad=True))
    assert not out.requires_grad and out.grad_fn is None


SECOND_ORDER = ["index_put", "exp", "log", "tanh", "sigmoid", "mul", "div", "pow", "matmul",
                "linear", "linear_weight_grad", "stack_middle", "log_softmax_3d",
                "log_softmax_backward", "nll_loss_weighted_ignored", "softmax",
                "softmax_backward", "sum_dim", "index_tensor", "max_dim", "cat", "expand",
                "where", "maximum", "conv2d",
                "avg_pool2d", "max_pool2d", "pad_constant", "gelu", "gelu_tanh", "erf",
                "layer_norm", "batch_norm", "einsum_bilinear", "scaled_dot_product_attention",
                "scatter", "gather_smaller_index", "cholesky", "solve_triangular_lower", "inv",
                "det", "slogdet_logabsdet", "solve_broadcast", "eigh", "cummax", "svd_tall",
                "qr_tall", "qr_wide", "matrix_exp"]


@pytest.mark.parametrize("name", SECOND_ORDER)
def test_second_derivatives_match_finite_differences(name):
    case = next(c for c in CASES if c.name == name)

    def first_derivative(*xs):
        out = case.fn(*xs)
        weights = pargraph.tensor(np.linspace(0.5, 1.5, out.numel()).reshape(out.shape))
        return pargraph.autograd.grad((out * weights).sum(), xs, create_graph=True)

    assert pargraph.autograd.gradcheck(first_derivative, tensors_of(case, requires_grad=True),
                                       atol=1e-4)


def test_every_primitive_is_covered_by_the_table():
    seen = set()
    for case in CASES:
        inputs = tensors_of(case, requires_grad=True)
        out = case.fn(*inputs)
        seen.update(n.op.name for n in toposort([out._node]))
        if out.requires_grad:
            grads = pargraph.autograd.grad(out.sum(), [x for x in inputs if x.requires_grad],
                                           allow_unused=True, create_graph=True)
            roots = [g._node for g in grads if g is not None]
            seen.update(n.op.name for n in history_region(roots))
            seen.update(n.op.name for n in toposort(roots))
    missing = set(ops.REGISTRY) - seen - {"leaf"}
    assert not missing, f"registered ops without a test case: {sorted(missing)}"


def test_type_promotion_follows_pytorch():
    f32 = pargraph.ones(2)
    assert (f32 * 2.5).dtype == np.float32  # Python scalars are weak
    assert (f32 + pargraph.ones(2, dtype=pargraph.float64)).dtype == np.float64
    assert (f32 + pargraph.tensor(1.0, dtype=pargraph.float64)).dtype == np.float32  # 0-d weak
    assert (pargraph.arange(3) * 1.5).dtype == np.float32  # int tensor, float scalar
    assert (pargraph.arange(3) + pargraph.tensor(2.0, dtype=pargraph.float64)).dtype == np.float64
    assert (pargraph.arange(3) / 2).dtype == np.float32  # true division of ints
    assert (pargraph.tensor([True]) + 1).dtype == np.int64
    assert pargraph.arange(3).exp().dtype == np.float32
    assert pargraph.arange(4).sum().dtype == np.int64


def test_extreme_gradient_is_shared_at_ties_like_pytorch():
    x = pargraph.tensor([1.0, 3.0, 3.0], requires_grad=True)
    x.max().backward()
    assert x.grad.tolist() == [0.0, 0.5, 0.5]
    y = pargraph.tensor([[1.0, 3.0, 3.0]], requires_grad=True)
    y.max(1).values.sum().backward()  # max(dim) routes the gradient to the returned index
    assert y.grad.tolist() == [[0.0, 1.0, 0.0]]


def test_sqrt_and_pow_at_zero_follow_pytorch_conventions():
    x = pargraph.tensor([0.0, 4.0], requires_grad=True)
    (2.0 ** x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [np.log(2), 16 * np.log(2)], rtol=1e-6)
    base = pargraph.tensor([0.0, 2.0], requires_grad=True)
    exponent = pargraph.tensor([2.0, 2.0], requires_grad=True)
    (base ** exponent).sum().backward()
    assert exponent.grad.tolist()[0] == 0.0  # not nan: PyTorch's convention at x == 0


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("shapes", [((1, 128), (1, 185)), ((1, 1, 5), (1, 1, 3)),
                                    ((4, 6), (4, 3))])
def test_a_weight_gradient_of_one_row_is_the_matrix_products_numbers(dtype, shapes):
    # One row takes an outer product instead of a matrix product: the same numbers, one
    # product each, as the matrix product of every other case.
    rng = np.random.default_rng(0)
    g, x = (rng.standard_normal(s).astype(dtype) for s in shapes)
    got = ops.REGISTRY["linear_weight_grad"].forward(g, x)
    rows = (-1, g.shape[-1]), (-1, x.shape[-1])
    expected = np.matmul(g.reshape(rows[0]).T, x.reshape(rows[1]))
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("key", [1, -1, (1, 2), (0, -3, 1), (3, 2, 1), 4, -5, (0, 3),
                                 (0, 0, 0, 0), True, (1, slice(None)), np.int64(2)])
def test_indexing_with_ints_gives_numpys_shapes_and_errors(key):
    x = np.arange(24.0).reshape(4, 3, 2)
    try:
        expected = x[key]
    except IndexError as error:
        with pytest.raises(IndexError, match=str(error).split(" (")[0]):
            pargraph.tensor(x)[key]
        return
    np.testing.assert_array_equal(pargraph.tensor(x)[key].numpy(), expected)
