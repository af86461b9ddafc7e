"""Index, split, set and integration functions against PyTorch: scatter_reduce (every reduction,
with and without self, gradients with ties), index_add/copy/fill, masked_scatter,
tensor_split and its h/v/d forms, isin, nanmedian, unique_consecutive, trapezoid, combinations,
pdist, vander, matrix_exp, any/all over dimensions and the dtype functions."""

import numpy as np
import pytest

import pargraph

torch = pytest.importorskip("torch")  # the test extra installs the CPU build

RNG = np.random.default_rng(3)


def both(call, *arrays, grad=True, exact=False):
    """``call(library, *tensors)`` on pargraph and torch: equal values and, for float64
    inputs, equal gradients of a weighted sum of the (float) results."""
    ours_in = [pargraph.tensor(a, requires_grad=grad and a.dtype == np.float64) for a in arrays]
    theirs_in = [torch.tensor(a, requires_grad=grad and a.dtype == np.float64) for a in arrays]
    ours, theirs = call(pargraph, *ours_in), call(torch, *theirs_in)
    single = not isinstance(theirs, (tuple, list))
    ours, theirs = ((ours,), (theirs,)) if single else (tuple(ours), tuple(theirs))
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert tuple(a.shape) == tuple(b.shape)
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
        if exact or not b.is_floating_point():
            np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
        else:
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-12,
                                       atol=1e-12, equal_nan=True)
    wanted = [k for k, a in enumerate(arrays) if grad and a.dtype == np.float64]
    floats = [k for k, b in enumerate(theirs) if b.requires_grad]
    if wanted and floats:
        weights = [RNG.standard_normal(tuple(theirs[k].shape)) for k in floats]
        sum((ours[k] * pargraph.tensor(w)).sum() for k, w in zip(floats, weights)).backward()
        sum((theirs[k] * torch.tensor(w)).sum() for k, w in zip(floats, weights)).backward()
        for k in wanted:
            got, want = ours_in[k].grad, theirs_in[k].grad
            if want is None or got is None:  # no gradient reached it: none, or zeros
                assert got is None or not got.numpy().any()
                assert want is None or not want.numpy(force=True).any()
            else:
                np.testing.assert_allclose(got.numpy(), want.numpy(force=True), rtol=1e-10,
                                           atol=1e-12)


X = RNG.standard_normal((3, 5))
TIES = np.array([[1.0, 3.0, 3.0, 0.5, 2.0], [4.0, 4.0, 1.0, 1.0, 0.0], [0.0, 2.0, 2.0, 2.0, 9.0]])
INDEX = np.array([[0, 1, 0, 4], [2, 2, 2, 0], [3, 3, 1, 1]])
SRC = np.array([[3.0, 3.0, 7.0, 1.0, 5.0], [4.0, 1.0, 4.0, 2.0, 8.0], [2.0, 2.0, 0.0, 2.0, 1.0]])


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_as_pytorchs(reduce, include_self):
    def call(lib, x, src):
        return x.scatter_reduce(1, lib.tensor(INDEX), src, reduce, include_self=include_self)

    both(call, TIES, SRC[:, :4], grad=reduce != "prod")
    both(call, X, RNG.standard_normal((3, 4)), grad=reduce != "prod")
    both(call, TIES, SRC, grad=False)  # a larger src: PyTorch's own gradient raises there
    both(lambda lib, x: x.scatter_reduce(0, lib.tensor([0, 2, 0]), lib.tensor([5, -3, -4]),
                                         reduce, include_self=include_self),
         np.array([1, 2, 3]))
    if reduce == "prod":
        x = pargraph.tensor(X, requires_grad=True)
        with pytest.raises(NotImplementedError, match="derivative of reduce='prod'"):
            x.scatter_reduce(1, pargraph.tensor(INDEX), pargraph.tensor(SRC), "prod").sum() \
                .backward()
    with pytest.raises(RuntimeError, match="reduce argument must be either sum, prod, mean, "
                                           "amax or amin, got median"):
        pargraph.tensor(X).scatter_reduce(1, pargraph.tensor(INDEX), pargraph.tensor(SRC),
                                          "median")


def test_index_functions_as_pytorchs():
    index = np.array([4, 0, 2])
    source = RNG.standard_normal((3, 3))
    both(lambda lib, x, s: x.index_add(1, lib.tensor(index), s, alpha=2.0), X, source)
    both(lambda lib, x, s: lib.index_add(x, 1, lib.tensor(index), s), X, source)
    both(lambda lib, x, s: x.index_copy(1, lib.tensor(index), s), X, source)
    both(lambda lib, x: x.index_fill(1, lib.tensor(index), -1.5), X)
    mask = np.array([[True, False, True, False, False]] * 3)
    both(lambda lib, x, s: x.masked_scatter(lib.tensor(mask), s), X, source)
    both(lambda lib, x, s: x.masked_scatter(lib.tensor(mask[0]), s), X, source)


def test_splits_as_pytorchs():
    both(lambda lib, x: x.tensor_split(3, dim=1), X)
    both(lambda lib, x: lib.tensor_split(x, [1, 4], dim=1), X)
    both(lambda lib, x: x.tensor_split(lib.tensor([2]), 0), X)
    both(lambda lib, x: x.tensor_split([0, 9]), X)
    both(lambda lib, x: lib.hsplit(x, [2]), X)
    both(lambda lib, x: x.vsplit(3), X)
    both(lambda lib, x: lib.dsplit(x.reshape(3, 1, 5), [1, 3]), X)
    for lib in (pargraph, torch):
        with pytest.raises(RuntimeError, match="the size of the dimension 5 is not divisible "
                                               "by the split_size 2"):
            lib.hsplit(lib.tensor(X), 2)
        with pytest.raises(RuntimeError, match="torch.dsplit requires a tensor with at least 3 "
                                               "dimension"):
            lib.dsplit(lib.tensor(X), 2)


def test_set_and_order_functions_as_pytorchs():
    values = np.array([3, 1, 1, 2, 2, 2, 3, 1])
    both(lambda lib, x: lib.isin(x, lib.tensor([1, 5])), values)
    both(lambda lib, x: lib.isin(x, lib.tensor([1, 5]), invert=True), values)
    both(lambda lib, x: x.unique_consecutive(return_inverse=True, return_counts=True), values)
    rows = np.array([[1, 2], [1, 2], [3, 4], [1, 2]])
    both(lambda lib, x: x.unique_consecutive(return_counts=True, dim=0), rows)
    with_nan = X.copy()
    with_nan[0, 1] = with_nan[2, :] = np.nan
    both(lambda lib, x: x.nanmedian(), with_nan, grad=False)
    both(lambda lib, x: tuple(x.nanmedian(1)), with_nan)
    both(lambda lib, x: tuple(lib.nanmedian(x, 0, keepdim=True)), with_nan)
    both(lambda lib, x: x.msort(), X)
    both(lambda lib, x: x.diagflat(1), X[:2, :2])
    for lib in (pargraph, torch):
        assert lib.tensor([2.0]).is_nonzero() and not lib.tensor([[0]]).is_nonzero()
        with pytest.raises(RuntimeError, match="Boolean value of Tensor with more than one "
                                               "value is ambiguous"):
            lib.ones(2).is_nonzero()


def test_reductions_over_dimensions_and_integration_as_pytorchs():
    flags = X > 0
    both(lambda lib, x: (x.any(1), x.all(0, keepdim=True), lib.any(x, (0, 1))), flags)
    both(lambda lib, x: (lib.all(x, dim=1), x.any(-1, True)), X)
    points = np.sort(RNG.standard_normal(5))
    both(lambda lib, y: lib.trapezoid(y), X)
    both(lambda lib, y, x: lib.trapezoid(y, x), X, points)
    both(lambda lib, y: lib.trapezoid(y, dx=0.5, dim=0), X)
    both(lambda lib, y: lib.trapz(y, dim=0), X)
    both(lambda lib, y: lib.cumulative_trapezoid(y, dx=2.0), X)
    both(lambda lib, y, x: lib.cumulative_trapezoid(y, x), X, points)


def test_combinatorial_and_matrix_functions_as_pytorchs():
    vector = RNG.standard_normal(4)
    both(lambda lib, x: lib.combinations(x), vector)
    both(lambda lib, x: lib.combinations(x, 3, with_replacement=True), vector)
    both(lambda lib, x: lib.combinations(x, 0), vector)
    both(lambda lib, x: lib.pdist(x), X)
    both(lambda lib, x: lib.pdist(x, p=1), X)
    # (PyTorch's own gradient of vander raises: an in-place cumulative product)
    both(lambda lib, x: lib.vander(x), vector, grad=False)
    both(lambda lib, x: lib.vander(x, 3, increasing=True), vector, grad=False)
    x = pargraph.tensor(vector, requires_grad=True)
    assert pargraph.autograd.gradcheck(lambda x: pargraph.vander(x, 3), (x,))
    both(lambda lib, x: lib.vander(x), np.array([1, 2, 3]))
    both(lambda lib, a: lib.linalg.matrix_exp(a), RNG.standard_normal((2, 3, 3)))
    both(lambda lib, a: a.matrix_exp(), RNG.standard_normal((4, 4)))
    both(lambda lib, a, b, c: lib.chain_matmul(a, b, c), X, X.T, X[:, :2].copy())
    both(lambda lib, x: x.sgn(), X)


@pytest.mark.parametrize("pair", [("int64", "float32"), ("bool", "int8"), ("uint8", "int8"),
                                  ("float16", "bfloat16"), ("int32", "float64")])
def test_dtype_functions_as_pytorchs(pair):
    a, b = pair
    ours = pargraph.promote_types(getattr(pargraph, a), getattr(pargraph, b))
    theirs = torch.promote_types(getattr(torch, a), getattr(torch, b))
    assert str(ours).replace("pargraph.", "torch.") == str(theirs)  # printed as PyTorch's
    for x, y in ((a, b), (b, a)):
        assert pargraph.can_cast(getattr(pargraph, x), getattr(pargraph, y)) == \
            torch.can_cast(getattr(torch, x), getattr(torch, y))
    for scalar in (1, 1.0, True):
        ours = pargraph.result_type(pargraph.ones(2, dtype=getattr(pargraph, a)), scalar)
        theirs = torch.result_type(torch.ones(2, dtype=getattr(torch, a)), scalar)
        assert str(ours).replace("pargraph.", "torch.") == str(theirs)


def test_windows_puts_and_sizes_as_pytorchs():
    both(lambda lib, x: x.unfold(1, 2, 2), X)
    both(lambda lib, x: x.unfold(0, 3, 1), X)
    both(lambda lib, x: x.unfold(-1, 5, 3), X)
    rows, columns = np.array([0, 2, 0]), np.array([1, 4, 1])
    values = RNG.standard_normal(3)
    both(lambda lib, x, v: x.index_put((lib.tensor(rows), lib.tensor(columns)), v), X, values)
    both(lambda lib, x, v: x.index_put((lib.tensor(rows), lib.tensor(columns)), v,
                                       accumulate=True), X, values)
    both(lambda lib, x, v: x.put(lib.tensor([14, 0, 14]), v, accumulate=True), X, values)
    both(lambda lib, x, v: x.put(lib.tensor([[3], [7]]), v[:2].reshape(2, 1)), X, values)
    both(lambda lib, x: x.bitwise_not(), np.array([0, 5, -3]))
    both(lambda lib, x: x.bitwise_not(), np.array([True, False]))
    for lib in (pargraph, torch):
        t = lib.ones(3, 4, dtype=lib.float64)
        assert (t.nbytes, t.itemsize) == (96, 8)
        v = lib.autograd.Variable(t, requires_grad=True)
        assert v.requires_grad and v.is_leaf
        with pytest.raises(RuntimeError, match="maximum size for tensor at dimension 1 is 4 "
                                               "but size is 5"):
            t.unfold(1, 5, 1)


def test_random_fills_draw_their_distributions():
    n = 20000
    x = pargraph.zeros(n, dtype=pargraph.float64)
    assert abs(float(x.bernoulli_(0.3).mean()) - 0.3) < 0.02
    assert abs(float(x.exponential_(2.0).mean()) - 0.5) < 0.02
    assert abs(float(x.geometric_(0.25).mean()) - 4.0) < 0.15
    assert abs(float(x.log_normal_(0.0, 0.5).log().std()) - 0.5) < 0.02
    assert abs(float(x.cauchy_(1.0, 2.0).median()) - 1.0) < 0.1
    drawn = x.random_(3, 7)
    assert set(np.unique(drawn.numpy()).tolist()) == {3.0, 4.0, 5.0, 6.0}
    assert set(np.unique(x.random_(2).numpy()).tolist()) == {0.0, 1.0}
    assert float(pargraph.zeros(100).random_().max()) > 2 ** 20  # up to 2**24 for float32


@pytest.mark.parametrize("name", ["sigmoid_", "sqrt_", "tanh_", "floor_", "log1p_", "neg_",
                                  "reciprocal_", "sgn_", "logit_"])
def test_in_place_unary_forms_as_pytorchs(name):
    positive = np.abs(X) / 4 + 0.1
    both(lambda lib, x: getattr(x * 1.0, name)(), positive)


@pytest.mark.parametrize("name", ["atan2_", "hypot_", "fmod_", "eq_", "gt_", "xlogy_",
                                  "float_power_", "copysign_"])
def test_in_place_binary_forms_as_pytorchs(name):
    both(lambda lib, x, y: getattr(x * 1.0, name)(y), np.abs(X) + 0.5, X.copy())


def test_small_methods_as_pytorchs():
    both(lambda lib, x: (x.clip(-0.5, 0.5), x.trace() if x.shape[0] == x.shape[1] else x.sum(),
                         x.logical_not(), x.isposinf(), x.isneginf()), X)
    both(lambda lib, x: x[:, :3].trace(), X)
    both(lambda lib, x: x.take(lib.tensor([0, 14, 7])), X)
    both(lambda lib, x: x.bincount(minlength=6), np.array([1, 1, 4]))
    nan = X.copy()
    nan[0, 0] = np.nan
    both(lambda lib, x, y: (x.fmax(y), x.fmin(y)), nan, X[::-1].copy(), grad=False)
    both(lambda lib, x: (x * 1.0).tril_(1), X)
    both(lambda lib, x: (x * 1.0).triu_(-1), X)
    both(lambda lib, x: (x * 1.0).cumsum_(1), X)
    both(lambda lib, x: (x * 1.0).fill_diagonal_(7.0, wrap=True), np.zeros((7, 3)))
    both(lambda lib, x: (x.short(), x.char()), X * 10)
    for lib in (pargraph, torch):
        t = lib.tensor(X)
        assert t.real is t and t.conj() is t and t.is_signed() and t.is_same_size(t)
        with pytest.raises(RuntimeError, match="imag is not implemented for tensors with "
                                               "non-complex dtypes"):
            _ = t.imag
