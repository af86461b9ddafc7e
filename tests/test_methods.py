"""Everyday Tensor methods and torch.* functions against PyTorch: values, dtypes and
gradients (float64), methods and their function forms."""

import re
import warnings

import numpy as np
import pytest

import pargraph

torch = pytest.importorskip("torch")  # the test extra installs the CPU build

RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4)) * 2
B = RNG.uniform(0.5, 2.0, (3, 4)) * np.where(RNG.standard_normal((3, 4)) > 0, 1, -1)
V = RNG.standard_normal(3)
W = RNG.standard_normal(3)
P = RNG.uniform(0.5, 3.0, (3, 4))

#: (name, differentiable operands, keywords or extra arguments, as a function too)
CASES = [
    ("floor", [A], {}, True), ("ceil", [A], {}, True), ("trunc", [A], {}, True),
    ("round", [A], {"decimals": 1}, True), ("tan", [A * 0.4], {}, True),
    ("sinh", [A], {}, True), ("cosh", [A], {}, True), ("log2", [P], {}, True),
    ("log10", [P], {}, True), ("atan2", [A, B], {}, True), ("remainder", [A, B], {}, True),
    ("floor_divide", [A, B], {}, True), ("lerp", [A, B], {"weight": 0.3}, True),
    ("dot", [V, W], {}, True), ("outer", [V, W], {}, True), ("cross", [V, W], {"dim": 0}, True),
    ("inner", [A, B], {}, True), ("inner", [A, V[:1].reshape(())], {}, True),
    ("clamp_min", [A], {"min": 0.3}, True), ("clamp_max", [A], {"max": 0.3}, True),
    ("kron", [V, W], {}, True), ("diag", [V], {"diagonal": 1}, True),
    ("diagonal", [A], {"offset": 1}, True), ("narrow", [A], {"dim": 1, "start": 1,
                                                             "length": 2}, True),
    ("roll", [A], {"shifts": (1, -1), "dims": (0, 1)}, True),
    ("tile", [V], {"dims": (2, 2)}, True), ("repeat_interleave", [V], {"repeats": 2}, True),
    ("addmm", [A[:, :3], A, B.T], {"beta": 0.5, "alpha": 2.0}, True),
    ("broadcast_to", [V], {"size": (2, 3)}, True),
    ("asin", [A * 0.4], {}, True), ("acos", [A * 0.4], {}, True), ("atan", [A], {}, True),
    ("asinh", [A], {}, True), ("acosh", [P + 1], {}, True), ("atanh", [A * 0.4], {}, True),
    ("arcsin", [A * 0.4], {}, True), ("arccos", [A * 0.4], {}, True),
    ("arctan", [A], {}, True), ("arcsinh", [A], {}, True), ("arccosh", [P + 1], {}, True),
    ("arctanh", [A * 0.4], {}, True), ("arctan2", [A, B], {}, True),
    ("expm1", [A], {}, True), ("exp2", [A], {}, True), ("erfc", [A], {}, True),
    ("erfinv", [A * 0.4], {}, True), ("reciprocal", [B], {}, True), ("sinc", [A], {}, True),
    ("hypot", [A, B], {}, True), ("logaddexp", [A, B], {}, True),
    ("logaddexp2", [A, B], {}, True), ("fmod", [A * 3, B], {}, True),
    ("copysign", [A, B], {}, True), ("xlogy", [A, P], {}, True),
    ("deg2rad", [A], {}, True), ("rad2deg", [A], {}, True), ("frac", [A * 3], {}, True),
    ("logit", [P / 4], {}, True), ("logit", [P / 4], {"eps": 0.3}, True),
    ("float_power", [P], {"exponent": 2.5}, True),
    ("cumprod", [A], {"dim": 1}, True), ("absolute", [B], {}, True),
    ("multiply", [A, B], {}, True), ("divide", [A, B], {}, True),
    ("divide", [A * 5, B], {"rounding_mode": "trunc"}, True),
    ("true_divide", [A, B], {}, True), ("subtract", [A, B], {"alpha": 2.0}, True),
    ("negative", [A], {}, True), ("positive", [A], {}, True), ("fix", [A * 3], {}, True),
    ("swapaxes", [A], {"axis0": 0, "axis1": 1}, True),
    ("swapdims", [A], {"dim0": 1, "dim1": 0}, True), ("ravel", [A], {}, True),
    ("greater", [A, B], {}, True), ("greater_equal", [A, B], {}, True),
    ("less", [A, B], {}, True), ("less_equal", [A, B], {}, True),
    ("not_equal", [A, B], {}, True), ("signbit", [A], {}, True),
    ("heaviside", [A * np.array([1.0, 0.0, 1.0, 0.0]), B], {}, True),
    ("nan_to_num", [np.array([np.nan, np.inf, -np.inf, 1.5])], {"posinf": 9.0}, True),
    ("div", [A * 5, B], {"rounding_mode": "trunc"}, True),
    ("div", [A * 5, B], {"rounding_mode": "floor"}, True),
    ("sub", [A, B], {"alpha": 2.0}, True), ("add", [A, B], {"alpha": -0.5}, True),
    ("addcmul", [A, B, P], {"value": 0.5}, True), ("addcdiv", [A, B, P], {"value": -2.0}, True),
    ("diff", [A], {}, True), ("diff", [A], {"n": 2, "dim": 0}, True),
    ("diff", [A], {"n": 5, "dim": 1}, True), ("rot90", [A], {}, True),
    ("rot90", [A], {"k": 3, "dims": (1, 0)}, True), ("rot90", [A], {"k": -2}, True),
    ("fliplr", [A], {}, True), ("flipud", [A], {}, True), ("diag_embed", [A], {}, True),
    ("diag_embed", [A], {"offset": -1, "dim1": 0, "dim2": 2}, True),
    ("diag_embed", [V], {"offset": 2}, True), ("dist", [A, B], {}, True),
    ("dist", [A, B], {"p": 3}, True), ("dist", [A, B], {"p": float("inf")}, True),
    ("renorm", [A], {"p": 2, "dim": 0, "maxnorm": 1.5}, True),
    ("renorm", [A], {"p": 1, "dim": 1, "maxnorm": 2.0}, True),
    ("cov", [A], {}, True), ("cov", [A], {"correction": 0}, True), ("corrcoef", [A], {}, True),
    ("count_nonzero", [A * (A > 0)], {"dim": 1}, True), ("unflatten", [A], {"dim": 1,
                                                                          "sizes": (2, -1)}, True),
    ("quantile", [A], {"q": 0.3, "dim": 1}, True),
    ("quantile", [A], {"q": 0.75, "interpolation": "midpoint"}, True),
    ("nanquantile", [A], {"q": 0.5, "dim": 0, "keepdim": True}, True),
    ("nansum", [A], {"dim": 1}, True), ("nanmean", [A], {}, True),
]


def _call(library, name, operands, keywords, function):
    if function:
        return getattr(library, name)(*operands, **keywords)
    return getattr(operands[0], name)(*operands[1:], **keywords)


@pytest.mark.parametrize("function", [False, True], ids=["method", "function"])
@pytest.mark.parametrize("name,arrays,keywords,_", CASES, ids=[c[0] for c in CASES])
def test_methods_and_functions_equal_pytorch(name, arrays, keywords, _, function):
    ours_in = [pargraph.tensor(a, requires_grad=True) for a in arrays]
    theirs_in = [torch.tensor(a, requires_grad=True) for a in arrays]
    ours = _call(pargraph, name, ours_in, keywords, function)
    theirs = _call(torch, name, theirs_in, keywords, function)
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-12)
    if name in ("floor_divide", "heaviside"):  # no derivative in PyTorch: backward raises
        with pytest.raises(RuntimeError, match=f"derivative for .*{name}.* is not"):
            theirs.sum().backward()
        with pytest.raises(RuntimeError, match=f"derivative for .*{name}.* is not"):
            ours.sum().backward()
            pargraph.compute()
    elif theirs.requires_grad:
        weights = RNG.standard_normal(tuple(theirs.shape))
        (ours * pargraph.tensor(weights)).sum().backward()
        (theirs * torch.tensor(weights)).sum().backward()
        for a, b in zip(ours_in, theirs_in):
            expected = np.zeros(b.shape) if b.grad is None else b.grad.numpy()
            got = np.zeros(a.shape) if a.grad is None else a.grad.numpy()
            np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


def test_integer_and_boolean_forms_equal_pytorch():
    x, y = np.array([-7, 7, 5, -3]), np.array([2, -3, 5, 4])
    for mode in ("trunc", "floor"):
        ours = pargraph.tensor(x).div(pargraph.tensor(y), rounding_mode=mode)
        theirs = torch.tensor(x).div(torch.tensor(y), rounding_mode=mode)
        assert ours.tolist() == theirs.tolist() and str(ours.dtype).split(".")[-1] == "int64"
    for name in ("remainder", "floor_divide"):
        ours = getattr(pargraph.tensor(x), name)(pargraph.tensor(y))
        theirs = getattr(torch.tensor(x), name)(torch.tensor(y))
        assert ours.tolist() == theirs.tolist() and str(ours.dtype).split(".")[-1] == "int64"
    assert (pargraph.tensor(x) // 2).tolist() == (torch.tensor(x) // 2).tolist()
    assert (pargraph.tensor(x) % 3).tolist() == (torch.tensor(x) % 3).tolist()
    a, b = pargraph.tensor([1, 0, 2]), pargraph.tensor([1, 1, 0])
    ta, tb = torch.tensor([1, 0, 2]), torch.tensor([1, 1, 0])
    for name in ("logical_and", "logical_or", "logical_xor"):
        assert getattr(a, name)(b).tolist() == getattr(ta, name)(tb).tolist()
    assert pargraph.logical_not(a).tolist() == torch.logical_not(ta).tolist()
    z = pargraph.tensor([1.0, float("inf"), float("nan")])
    assert z.isfinite().tolist() == torch.tensor([1.0, float("inf"), float("nan")]).isfinite(
    ).tolist()


def test_shape_and_layout_queries_equal_pytorch():
    ours, theirs = pargraph.tensor(A), torch.tensor(A)
    assert ours.stride() == theirs.stride() and ours.stride(1) == theirs.stride(1)
    assert ours.element_size() == theirs.element_size()
    assert ours.nelement() == theirs.nelement() and ours.ndimension() == theirs.ndimension()
    assert ours.is_contiguous() and ours.contiguous() is ours and not ours.is_cuda
    for flag in ("is_cuda", "is_cpu", "is_xpu", "is_mps", "is_meta", "is_sparse",
                 "is_sparse_csr", "is_quantized", "is_mkldnn", "is_nested"):
        assert getattr(ours, flag) is getattr(theirs, flag), flag
    assert [t.tolist() for t in ours.unbind(1)] == [t.tolist() for t in theirs.unbind(1)]
    assert ours.new_zeros(2).dtype == pargraph.float64 and ours.new_full((2,), 3).tolist() == \
        [3.0, 3.0]
    assert pargraph.take(ours, pargraph.tensor([0, 5])).tolist() == \
        torch.take(theirs, torch.tensor([0, 5])).tolist()
    np.testing.assert_allclose(pargraph.tensordot(ours, pargraph.tensor(B.T), dims=1).numpy(),
                               torch.tensordot(theirs, torch.tensor(B.T), dims=1).numpy())
    np.testing.assert_array_equal(pargraph.hstack([ours, ours]).numpy(),
                                  torch.hstack([theirs, theirs]).numpy())
    np.testing.assert_array_equal(pargraph.vstack([ours[0], ours[1]]).numpy(),
                                  torch.vstack([theirs[0], theirs[1]]).numpy())
    close = pargraph.tensor([1.0, 1e9]).isclose(pargraph.tensor([1.0 + 1e-9, 1.0001e9]))
    assert close.tolist() == torch.tensor([1.0, 1e9]).isclose(
        torch.tensor([1.0 + 1e-9, 1.0001e9])).tolist()


def test_in_place_forms_equal_pytorch():
    ours, theirs = pargraph.tensor(A.copy()), torch.tensor(A.copy())
    index, source = [0, 2, 0], RNG.standard_normal((4, 3))
    ours.index_add_(0, pargraph.tensor(index), pargraph.tensor(source).t(), alpha=0.5)
    theirs.index_add_(0, torch.tensor(index), torch.tensor(source).t(), alpha=0.5)
    ours.index_fill_(1, pargraph.tensor([3]), -1.0)
    theirs.index_fill_(1, torch.tensor([3]), -1.0)
    ours.masked_fill_(ours > 1, 9.0)
    theirs.masked_fill_(theirs > 1, 9.0)
    ours.exp_().relu_().t_().unsqueeze_(0).squeeze_().clamp_min_(0.5).clamp_max_(3.0)
    theirs.exp_().relu_().t_().unsqueeze_(0).squeeze_().clamp_min_(0.5).clamp_max_(3.0)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12)


def test_logspace_is_complex_and_inners_error_equal_pytorch():
    for args, kwargs in (((0, 2, 3), {}), ((-1, 1, 5), {"base": 2}),
                         ((1, 3, 4), {"dtype": pargraph.float64})):
        theirs_kwargs = {**kwargs, "dtype": torch.float64} if "dtype" in kwargs else kwargs
        ours, theirs = pargraph.logspace(*args, **kwargs), torch.logspace(*args, **theirs_kwargs)
        assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)
    assert pargraph.is_complex(pargraph.ones(2)) is torch.is_complex(torch.ones(2)) is False
    assert pargraph.ones(2).is_complex() is False
    with pytest.raises(RuntimeError) as theirs:
        torch.inner(torch.ones(2, 3), torch.ones(4, 5))
    with pytest.raises(RuntimeError, match=re.escape(str(theirs.value))):
        pargraph.inner(pargraph.ones(2, 3), pargraph.ones(4, 5))


def test_value_dependent_methods_equal_pytorch():
    x = np.array([[3.0, 0.0, 1.0, 3.0], [0.0, 2.0, 2.0, 5.0], [1.0, 1.0, 0.0, 4.0]])
    ours, theirs = pargraph.tensor(x), torch.tensor(x)
    assert ours.nonzero().tolist() == theirs.nonzero().tolist()
    assert [t.tolist() for t in ours.nonzero(as_tuple=True)] == \
        [t.tolist() for t in theirs.nonzero(as_tuple=True)]
    for a, b in zip(ours.unique(return_inverse=True, return_counts=True),
                    theirs.unique(return_inverse=True, return_counts=True)):
        assert a.tolist() == b.tolist()
    assert ours.median().item() == theirs.median().item()
    for keepdim in (False, True):
        a, b = ours.median(1, keepdim=keepdim), theirs.median(1, keepdim=keepdim)
        assert a.values.tolist() == b.values.tolist()
        assert a.indices.tolist() == b.indices.tolist()
    leaf = pargraph.tensor(x, requires_grad=True)
    leaf.median(0).values.sum().backward()
    reference = torch.tensor(x, requires_grad=True)
    reference.median(0).values.sum().backward()
    np.testing.assert_array_equal(leaf.grad.numpy(), reference.grad.numpy())


def test_sampling_functions_behave_as_pytorchs():
    pargraph.manual_seed(0)
    weights = pargraph.tensor([[0.0, 1.0, 3.0], [2.0, 0.0, 1.0]])
    drawn = weights.multinomial(2)
    assert tuple(drawn.shape) == (2, 2)
    assert sorted(drawn[0].tolist()) == [1, 2] and sorted(drawn[1].tolist()) == [0, 2]
    with pytest.raises(RuntimeError, match="n_sample > prob_dist"):
        weights.multinomial(4)
    with pytest.raises(RuntimeError, match="not enough non-negative category"):
        pargraph.tensor([2.0, 0.0, 0.0]).multinomial(2)  # as torch.multinomial raises
    assert set(pargraph.tensor([0.0, 1.0]).multinomial(5, replacement=True).tolist()) == {1}
    samples = pargraph.normal(pargraph.tensor([0.0, 100.0]), pargraph.tensor([1.0, 0.0]))
    assert samples[1].item() == 100.0 and tuple(samples.shape) == (2,)
    assert tuple(pargraph.normal(0.0, 1.0, size=(3, 2)).shape) == (3, 2)
    ints = pargraph.randint_like(pargraph.zeros(50, dtype=pargraph.int64), 2, 5)
    assert ints.dtype == pargraph.int64 and 2 <= int(ints.min()) and int(ints.max()) < 5


# --- legacy tensor types and print options ---------------------------------------------------

LEGACY = ["FloatTensor", "DoubleTensor", "HalfTensor", "ByteTensor", "CharTensor",
          "ShortTensor", "IntTensor", "LongTensor", "BoolTensor"]


@pytest.mark.parametrize("name", LEGACY)
def test_legacy_tensor_types_are_pytorchs(name):
    ours, theirs = getattr(pargraph, name), getattr(torch, name)
    assert ours(2, 3).shape == tuple(theirs(2, 3).shape) and ours().shape == (0,)
    made = ours([1, 0, 2])
    assert str(made.dtype).split(".")[-1] == str(theirs([1, 0, 2]).dtype).split(".")[-1]
    np.testing.assert_array_equal(made.numpy(), theirs([1, 0, 2]).numpy())
    assert made.type() == theirs([1, 0, 2]).type() == f"torch.{name}"
    assert isinstance(made, ours) and isinstance(made, pargraph.Tensor)
    assert not isinstance(made.double() if name != "DoubleTensor" else made.float(), ours)
    assert pargraph.ones(2).type(ours).dtype == made.dtype
    assert pargraph.ones(2).type(f"torch.{name}").dtype == made.dtype
    assert ours(made) is made
    with pytest.raises(TypeError, match="invalid data type 'str'"):
        ours("x")


def test_a_summary_shows_the_edges():
    try:
        pargraph.set_printoptions(threshold=5, edgeitems=2)
        assert repr(pargraph.arange(10.0)) == "tensor([0., 1.,  ..., 8., 9.])"  # as PyTorch
        assert repr(pargraph.arange(100.0).reshape(10, 10)).count("...") == 5  # 4 rows, 1 column
    finally:
        pargraph.set_printoptions(profile="default")
    assert "..." not in repr(pargraph.arange(10.0))
    for tensor in (pargraph.arange(2000.0), pargraph.arange(2000.0).reshape(2, 1000) / 7,
                   pargraph.arange(4000.0).reshape(40, 100), pargraph.arange(1001)):
        assert repr(tensor) == repr(torch.tensor(tensor.numpy()))
    with pytest.raises(ValueError, match="profile"):
        pargraph.set_printoptions(profile="long")


def test_functional_forms_pytorch_has_at_top_level_are_there_too():
    x = RNG.standard_normal((2, 4, 6))
    for name in pargraph.FUNCTIONAL_AT_TOP:
        assert getattr(pargraph, name) is getattr(pargraph.nn.functional, name)
        assert hasattr(torch, name)
    w = RNG.standard_normal((3, 4, 2))
    np.testing.assert_allclose(pargraph.conv1d(pargraph.tensor(x), pargraph.tensor(w)).numpy(),
                               torch.conv1d(torch.tensor(x), torch.tensor(w)).numpy())
    np.testing.assert_allclose(pargraph.group_norm(pargraph.tensor(x), 2).numpy(),
                               torch.group_norm(torch.tensor(x), 2).numpy(), rtol=1e-10)
    np.testing.assert_allclose(pargraph.rrelu(pargraph.tensor(x), 0.1, 0.3).numpy(),
                               torch.rrelu(torch.tensor(x), 0.1, 0.3).numpy(), rtol=1e-12)


@pytest.mark.parametrize("source, destination", [
    (1, -1), (0, 2), ((0, 1), (2, 0)), ([0], [1]), ((0, 1), (0,)), ((0, 0), (1, 2)),
    ((0, 1), (1, 1)), (5, 0), (-4, 0), ((), ())])
def test_movedim_and_moveaxis_are_pytorchs(source, destination):
    x = np.arange(24.0).reshape(2, 3, 4)
    try:
        expected = torch.tensor(x).movedim(source, destination).numpy()
    except (RuntimeError, IndexError) as error:
        for name in ("movedim", "moveaxis"):
            with pytest.raises(type(error), match=re.escape(str(error))):
                getattr(pargraph.tensor(x), name)(source, destination)
        return
    for ours in (pargraph.tensor(x).movedim(source, destination),
                 pargraph.moveaxis(pargraph.tensor(x), source, destination)):
        np.testing.assert_array_equal(ours.numpy(), expected)
    grad = pargraph.tensor(x, requires_grad=True)
    (grad.movedim(source, destination) * pargraph.tensor(expected)).sum().backward()
    np.testing.assert_array_equal(grad.grad.numpy(), x)


def test_mode_as_pytorchs_cpu_kernel():
    """The smallest of the most frequent values, at its last occurrence; values carry the
    gradient to that element."""
    values = np.array([[1.0, 2.0, 2.0, 3.0], [4.0, 4.0, 1.0, 1.0], [5.0, 6.0, 7.0, 8.0]])
    for dim, keepdim in ((1, False), (0, True), (-1, True)):
        ours_in = pargraph.tensor(values, requires_grad=True)
        theirs_in = torch.tensor(values, requires_grad=True)
        ours, theirs = ours_in.mode(dim, keepdim), torch.mode(theirs_in, dim, keepdim)
        np.testing.assert_array_equal(ours.values.detach().numpy(), theirs.values.detach())
        np.testing.assert_array_equal(ours.indices.numpy(), theirs.indices)
        ours.values.sum().backward(), theirs.values.sum().backward()
        np.testing.assert_array_equal(ours_in.grad.numpy(), theirs_in.grad)
    scalar = pargraph.mode(pargraph.tensor(3.0))
    assert scalar.values.item() == 3.0 and scalar.indices.item() == 0


def test_histc_searchsorted_bucketize_as_pytorchs():
    data = np.array([1.0, 2.0, 1.0, 2.5, 4.0, -1.0, 3.0])
    for bins, low, high in ((4, 0, 3), (3, 0, 0), (5, 2, 2)):
        np.testing.assert_array_equal(
            pargraph.histc(pargraph.tensor(data), bins, low, high).numpy(),
            torch.histc(torch.tensor(data), bins, low, high).numpy())
    for keywords in ({"bins": 0}, {"bins": 3, "min": 2, "max": 1}):
        with pytest.raises(RuntimeError) as theirs:
            torch.histc(torch.tensor(data), **keywords)
        with pytest.raises(RuntimeError, match=re.escape(str(theirs.value))):
            pargraph.histc(pargraph.tensor(data), **keywords)
    sequence = np.array([[1, 3, 5, 7], [2, 4, 6, 8]])
    values = np.array([[3, 6, 9], [1, 4, 8]])
    for right in (False, True):
        ours = pargraph.searchsorted(pargraph.tensor(sequence), pargraph.tensor(values),
                                     right=right)
        theirs = torch.searchsorted(torch.tensor(sequence), torch.tensor(values), right=right)
        assert ours.tolist() == theirs.tolist() and ours.dtype == pargraph.int64
        ours = pargraph.bucketize(pargraph.tensor(values), pargraph.tensor(sequence[0]),
                                  right=right, out_int32=True)
        theirs = torch.bucketize(torch.tensor(values), torch.tensor(sequence[0]), right=right,
                                 out_int32=True)
        assert ours.tolist() == theirs.tolist() and ours.dtype == pargraph.int32
    assert pargraph.searchsorted(pargraph.tensor([1, 3]), 2).tolist() == 1
    with pytest.raises(TypeError):
        torch.searchsorted(torch.tensor([1, 3]), [2, 4])
    with pytest.raises(TypeError, match="a tensor or a number"):
        pargraph.searchsorted(pargraph.tensor([1, 3]), [2, 4])
    with pytest.raises(RuntimeError, match="boundaries tensor should be 1 dimension"):
        pargraph.searchsorted(pargraph.tensor(sequence), pargraph.tensor([[1], [2], [3]]))


def test_cdist_meshgrid_cartesian_prod_and_indices_as_pytorchs():
    x1, x2 = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((2, 5, 4))
    x2[0, 1] = x1[0, 0]  # a zero distance: a zero gradient there, as PyTorch's
    for p in (2.0, 1.0, 3.0, float("inf")):
        ours_in = [pargraph.tensor(a, requires_grad=True) for a in (x1, x2)]
        theirs_in = [torch.tensor(a, requires_grad=True) for a in (x1, x2)]
        ours, theirs = pargraph.cdist(*ours_in, p=p), torch.cdist(*theirs_in, p=p)
        np.testing.assert_allclose(ours.detach().numpy(), theirs.detach(), rtol=1e-12)
        ours.sum().backward(), theirs.sum().backward()
        for a, b in zip(ours_in, theirs_in):
            np.testing.assert_allclose(a.grad.numpy(), b.grad, rtol=1e-10, atol=1e-12)
    for indexing in ("ij", "xy"):
        ours = pargraph.meshgrid(pargraph.arange(2), pargraph.arange(3), pargraph.arange(4),
                                 indexing=indexing)
        theirs = torch.meshgrid(torch.arange(2), torch.arange(3), torch.arange(4),
                                indexing=indexing)
        assert [o.tolist() for o in ours] == [t.tolist() for t in theirs]
    with pytest.warns(UserWarning, match="indexing argument"):
        pargraph.meshgrid(pargraph.arange(2), pargraph.arange(2))
    assert pargraph.cartesian_prod(pargraph.tensor([1, 2]), pargraph.tensor([3, 4, 5])).tolist() \
        == torch.cartesian_prod(torch.tensor([1, 2]), torch.tensor([3, 4, 5])).tolist()
    for offset in (-1, 0, 2):
        assert pargraph.tril_indices(3, 4, offset).tolist() == \
            torch.tril_indices(3, 4, offset).tolist()
        assert pargraph.triu_indices(4, 3, offset).tolist() == \
            torch.triu_indices(4, 3, offset).tolist()
    a, b = pargraph.tensor(V, requires_grad=True), pargraph.tensor(W)
    assert pargraph.vdot(a, b).item() == pytest.approx(torch.vdot(torch.tensor(V),
                                                                  torch.tensor(W)).item())
    assert pargraph.ger(a, b).tolist() == torch.ger(torch.tensor(V), torch.tensor(W)).tolist()
    order = np.array([[2, 0, 1], [1, 1, 0], [0, 2, 2]])
    assert pargraph.take_along_dim(pargraph.tensor(A[:, :3]), pargraph.tensor(order), 1).tolist() \
        == torch.take_along_dim(torch.tensor(A[:, :3]), torch.tensor(order), 1).tolist()


NANS = np.where(RNG.standard_normal((3, 4)) > 0.8, np.nan, A)


def test_nan_reductions_pairs_selections_and_weighted_cov_as_pytorchs():
    def both(call, *arrays, grad=True):
        ours_in = [pargraph.tensor(a, requires_grad=grad) for a in arrays]
        theirs_in = [torch.tensor(a, requires_grad=grad) for a in arrays]
        ours, theirs = call(pargraph, *ours_in), call(torch, *theirs_in)
        ours, theirs = (ours, theirs) if isinstance(theirs, tuple) else ((ours,), (theirs,))
        for a, b in zip(ours, theirs):
            assert tuple(a.shape) == tuple(b.shape)
            assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-12,
                                       equal_nan=True)
        if grad:
            sum(pargraph.nansum(a * a) for a in ours).backward()
            sum(torch.nansum(b * b) for b in theirs).backward()
            for a, b in zip(ours_in, theirs_in):
                assert (a.grad is None) == (b.grad is None)
                if b.grad is not None:
                    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10,
                                               atol=1e-12)

    for dim in (0, 1, (0, 1)):
        both(lambda lib, x: lib.nansum(x, dim, keepdim=True), NANS)
        both(lambda lib, x: lib.nanmean(x, dim), NANS)
        both(lambda lib, x: lib.count_nonzero(x, dim), NANS > 0, grad=False)
    both(lambda lib, x: (lib.nansum(x), lib.nanmean(x)), NANS)
    both(lambda lib, x: lib.std_mean(x, 1), A)
    both(lambda lib, x: lib.var_mean(x, 0, keepdim=True, correction=0), A)
    both(lambda lib, x: lib.kthvalue(x, 2, 1), A)
    both(lambda lib, x: x.kthvalue(3, 0, keepdim=True), A)
    both(lambda lib, x: lib.aminmax(x), A)
    both(lambda lib, x: x.aminmax(dim=1, keepdim=True), A)
    both(lambda lib, x: lib.masked_select(x, x > 0), A)
    both(lambda lib, x, y: lib.masked_select(x, y[0] > 0), A, B)
    both(lambda lib, x, y: lib.diff(x, dim=1, prepend=y[:, :2], append=y), A, B)
    both(lambda lib, x: lib.diff(x > 0, dim=0), A, grad=False)
    both(lambda lib, x, y: x.clone().addcdiv_(y, y * 2, value=0.3), A, B)
    both(lambda lib, x, y: x.clone().addcmul_(y, y), A, B)
    for q in (0.0, 0.3, [0.25, 0.5, 1.0]):
        for dim in (None, 1):
            for interpolation in ("linear", "lower", "higher", "midpoint", "nearest"):
                for name in ("quantile", "nanquantile"):
                    both(lambda lib, x: getattr(lib, name)(
                        x, q if isinstance(q, float) else lib.tensor(q, dtype=lib.float64),
                        dim, keepdim=dim is None, interpolation=interpolation), NANS)
    weights = RNG.uniform(0.5, 1.5, 4)
    both(lambda lib, x, w: lib.cov(x, fweights=lib.tensor([1, 2, 1, 3]), aweights=w), A,
         weights)
    both(lambda lib, x: lib.cov(x, fweights=lib.tensor([1, 2, 1, 3]), correction=2), A)
    both(lambda lib, x, w: lib.cov(x[0], aweights=w), A, weights)


@pytest.mark.parametrize("call", [
    lambda lib: lib.diff(lib.tensor(1.0)), lambda lib: lib.diff(lib.ones(3), n=-1),
    lambda lib: lib.nanmean(lib.tensor([1, 2])), lambda lib: lib.rot90(lib.ones(2, 2), 1, [0]),
    lambda lib: lib.rot90(lib.ones(2, 2), 1, [1, 1]), lambda lib: lib.rot90(lib.ones(3)),
    lambda lib: lib.fliplr(lib.ones(3)), lambda lib: lib.flipud(lib.tensor(1.0)),
    lambda lib: lib.cov(lib.ones(2, 2, 2)), lambda lib: lib.ones(2, 3).unflatten(1, (2, -1)),
    lambda lib: lib.kthvalue(lib.ones(2, 3), 4, 1), lambda lib: lib.aminmax(lib.ones(0)),
    lambda lib: lib.quantile(lib.ones(3), 1.5), lambda lib: lib.quantile(lib.ones(3).long(), 0.5),
    lambda lib: lib.quantile(lib.ones(3), 0.5, interpolation="cubic"),
    lambda lib: lib.quantile(lib.ones(3), lib.tensor([0.5, 2.0])),
    lambda lib: lib.masked_select(lib.ones(3), lib.ones(3)),
])
def test_errors_of_the_new_methods_are_pytorchs(call):
    def raised(library):
        with pytest.raises(Exception) as caught:
            call(library)
        return type(caught.value).__name__, str(caught.value).split("\n")[0]

    ours, theirs = raised(pargraph), raised(torch)
    assert ours[0] == theirs[0]
    assert re.sub(r"torch\.|pargraph\.|Float|float32", "", ours[1]) == \
        re.sub(r"torch\.|pargraph\.|Float|float32", "", theirs[1])


@pytest.mark.parametrize("name", ["hann_window", "hamming_window", "bartlett_window",
                                  "blackman_window", "kaiser_window"])
def test_windows_as_pytorchs(name):
    for length in (0, 1, 2, 5, 8):
        for periodic in (True, False):
            ours = getattr(pargraph, name)(length, periodic)
            theirs = getattr(torch, name)(length, periodic)
            assert str(ours.dtype).split(".")[-1] == "float32"
            np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6, atol=1e-7)
    assert getattr(pargraph, name)(4, dtype=pargraph.float64).dtype == pargraph.float64
    np.testing.assert_allclose(pargraph.hamming_window(5, False, 0.6, 0.4).numpy(),
                               torch.hamming_window(5, False, 0.6, 0.4).numpy(), rtol=1e-6)
    np.testing.assert_allclose(pargraph.kaiser_window(6, True, 5.0).numpy(),
                               torch.kaiser_window(6, True, 5.0).numpy(), rtol=1e-6)


def test_stacking_counting_and_running_extremes_as_pytorchs():
    shapes = [(), (3,), (2, 3), (1, 2, 3, 4)]
    for name in ("atleast_1d", "atleast_2d", "atleast_3d"):
        for shape in shapes:
            assert tuple(getattr(pargraph, name)(pargraph.tensor(np.ones(shape))).shape) == \
                tuple(getattr(torch, name)(torch.tensor(np.ones(shape))).shape)
        ours = getattr(pargraph, name)([pargraph.ones(()), pargraph.ones(3)])
        theirs = getattr(torch, name)([torch.ones(()), torch.ones(3)])
        assert [tuple(t.shape) for t in ours] == [tuple(t.shape) for t in theirs]
    parts = [A[:, :1], A[:, 1]]
    for name in ("column_stack", "dstack", "hstack", "vstack"):
        if name == "hstack":
            continue
        np.testing.assert_array_equal(
            getattr(pargraph, name)([pargraph.tensor(p) for p in parts[:1] * 2]).numpy(),
            getattr(torch, name)([torch.tensor(p) for p in parts[:1] * 2]).numpy())
    np.testing.assert_array_equal(
        pargraph.column_stack([pargraph.tensor(p) for p in parts]).numpy(),
        torch.column_stack([torch.tensor(p) for p in parts]).numpy())
    blocks = [A[:1, :2], V, np.array(3.0), B[:2, :1]]
    ours = pargraph.block_diag(*[pargraph.tensor(b, requires_grad=True) for b in blocks])
    np.testing.assert_array_equal(ours.detach().numpy(),
                                  torch.block_diag(*[torch.tensor(b) for b in blocks]).numpy())
    counts = np.array([1, 1, 3, 0, 7])
    for minlength in (0, 10):
        assert pargraph.bincount(pargraph.tensor(counts), minlength=minlength).tolist() == \
            torch.bincount(torch.tensor(counts), minlength=minlength).tolist()
    for weights in (np.linspace(0.5, 2.5, 5).astype(np.float32), np.arange(5)):
        ours = pargraph.bincount(pargraph.tensor(counts), pargraph.tensor(weights))
        theirs = torch.bincount(torch.tensor(counts), torch.tensor(weights))
        assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
        np.testing.assert_allclose(ours.numpy(), theirs.numpy())
    for bins, value_range in ((4, (0.0, 3.0)), (3, None)):
        ours = pargraph.histogram(pargraph.tensor(A), bins, range=value_range)
        theirs = torch.histogram(torch.tensor(A), bins, range=value_range)
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a.numpy(), b.numpy())
    edges = np.array([-2.0, 0.0, 0.5, 3.0])
    ours = pargraph.histogram(pargraph.tensor(A), pargraph.tensor(edges), density=True)
    theirs = torch.histogram(torch.tensor(A), torch.tensor(edges), density=True)
    np.testing.assert_allclose(ours.hist.numpy(), theirs.hist.numpy())
    ties = np.array([[1.0, 3.0, 3.0, np.nan, 2.0, 5.0, 5.0],
                     [4.0, 2.0, 2.0, 1.0, 7.0, 0.0, np.nan]])
    for name in ("cummax", "cummin"):
        for dim in (0, 1):
            ours = getattr(pargraph, name)(pargraph.tensor(ties), dim)
            theirs = getattr(torch, name)(torch.tensor(ties), dim)
            np.testing.assert_array_equal(ours.values.numpy(), theirs.values.numpy())
            assert ours.indices.tolist() == theirs.indices.tolist()
        x, y = pargraph.tensor(A, requires_grad=True), torch.tensor(A, requires_grad=True)
        (getattr(x, name)(1).values * pargraph.tensor(B)).sum().backward()
        (getattr(y, name)(1).values * torch.tensor(B)).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), y.grad.numpy())
    extreme = np.array([[-1000.0, 0.0, 1.0, 2.0], [3.0, -2.0, 50.0, 700.0]])
    for dim in (0, 1):
        x, y = pargraph.tensor(extreme, requires_grad=True), torch.tensor(extreme,
                                                                          requires_grad=True)
        ours, theirs = x.logcumsumexp(dim), torch.logcumsumexp(y, dim)
        np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy())
        (ours * pargraph.tensor(B[:2])).sum().backward()
        (theirs * torch.tensor(B[:2])).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=1e-10, atol=1e-12)
    x = pargraph.tensor(extreme, requires_grad=True)
    (first,) = pargraph.autograd.grad(x.logcumsumexp(1).sum(), [x], create_graph=True)
    with pytest.raises(NotImplementedError, match="second derivative of logcumsumexp"):
        first.sum().backward()


@pytest.mark.parametrize("call", [
    lambda lib: lib.bincount(lib.tensor([-1, 1])), lambda lib: lib.bincount(lib.tensor([[1]])),
    lambda lib: lib.bincount(lib.tensor([1.0])),
    lambda lib: lib.hann_window(-1),
    lambda lib: lib.block_diag(lib.ones(1, 1, 1)),
])
def test_errors_of_counting_and_windows_are_pytorchs(call):
    for library in (pargraph, torch):
        with pytest.raises(RuntimeError) as caught:
            call(library)
        if library is pargraph:
            ours = str(caught.value)
        else:
            assert re.sub(r"torch\.", "", ours) == re.sub(r"torch\.", "", str(caught.value))


def test_shifts_gcd_lcm_and_bitwise_functions_as_pytorchs():
    torch = pytest.importorskip("torch")
    cases = [
        lambda t: t.tensor([1, 2, -3]) << 1, lambda t: t.tensor([1, 2, -3]) >> 1,
        lambda t: 1 << t.tensor([1, 2, -3]),
        lambda t: t.bitwise_left_shift(t.tensor([1, 2, -3]), t.tensor([3, 2, 1])),
        lambda t: t.tensor([1, 8]) << t.tensor([64, -1]),
        lambda t: t.tensor([-5, 5]) >> t.tensor([70, -1]),
        lambda t: t.tensor([1], dtype=t.uint8) << 9, lambda t: t.tensor([True]) << 1,
        lambda t: t.tensor([3], dtype=t.int32) << t.tensor([2], dtype=t.int8),
        lambda t: t.gcd(t.tensor([12, -18, 0]), t.tensor([8, 12, 0])),
        lambda t: t.lcm(t.tensor([4, -6, 0]), t.tensor([6, 4, 5])),
        lambda t: t.bitwise_and(t.tensor([12, 10]), t.tensor([10, 3])),
        lambda t: t.tensor([12, 10]).bitwise_or(3), lambda t: t.bitwise_xor(t.tensor([5]), 1),
        lambda t: t.tensor([12, 10]).gcd_(t.tensor([8, 4])),
        lambda t: t.tensor([12, 10]).bitwise_right_shift_(1),
        lambda t: t.ldexp(t.tensor([1.0, 2.0]), t.tensor([3, -1])),
        lambda t: t.ldexp(t.tensor([1, 2]), t.tensor([1, 2])),
    ]
    for case in cases:
        ours, theirs = case(pargraph), case(torch)
        assert ours.tolist() == theirs.tolist()
        assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    for case in (lambda t: t.tensor([1.5]) << 1,
                 lambda t: t.gcd(t.tensor([True]), t.tensor([False])),
                 lambda t: t.tensor([1.5]).bitwise_and(t.tensor([1.0]))):
        with pytest.raises(RuntimeError):
            case(torch)
        with pytest.raises(RuntimeError, match="not implemented for"):
            case(pargraph)
    x = pargraph.tensor([1, 2])
    alias = x
    x <<= 2
    x &= 12
    assert x is alias and alias.tolist() == [4, 8]


def test_frexp_as_pytorchs_and_its_gradient_by_finite_differences():
    torch = pytest.importorskip("torch")
    values = [3.0, -0.5, 0.0, float("inf"), 1e-40, 5.0]
    for dtype in ("float32", "float64"):
        ours = pargraph.frexp(pargraph.tensor(values, dtype=getattr(pargraph, dtype)))
        theirs = torch.frexp(torch.tensor(values, dtype=getattr(torch, dtype)))
        np.testing.assert_array_equal(ours.mantissa.numpy(), theirs.mantissa.numpy())
        assert ours.exponent.tolist() == theirs.exponent.tolist()
        assert ours.exponent.dtype == pargraph.int32
    with pytest.raises(RuntimeError, match="only supports floating-point"):
        pargraph.tensor([3]).frexp()
    x = np.array([3.0, -0.75, 5.0, 0.3])
    w = np.arange(4.0)
    t = pargraph.tensor(x, requires_grad=True)
    (t.frexp().mantissa * pargraph.tensor(w)).sum().backward()
    step = 1e-7  # inside each value's binade the mantissa is x / 2**e
    numeric = [w[k] * (np.frexp(x[k] + step)[0] - np.frexp(x[k] - step)[0]) / (2 * step)
               for k in range(4)]
    np.testing.assert_allclose(t.grad.numpy(), numeric, rtol=1e-6)


@pytest.mark.parametrize("call", [
    lambda t, x, a, b: t.addmv(x[0, :3], a, b[:, 0], beta=0.5, alpha=2.0),
    lambda t, x, a, b: t.addr(x, a[:, 0], b[0, :], alpha=3.0),
    lambda t, x, a, b: t.addbmm(x, a.reshape(1, 3, 4).expand(2, 3, 4), b.expand(2, 4, 3),
                                beta=2.0),
    lambda t, x, a, b: x.addmm(a, b, beta=0.0),
    lambda t, x, a, b: t.cholesky_solve(a[:, :2], t.linalg.cholesky(x @ x.mT + t.eye(3))),
    lambda t, x, a, b: t.cholesky_solve(a[:, :2], t.linalg.cholesky(x @ x.mT + t.eye(3)).mT,
                                        upper=True),
    lambda t, x, a, b: t.cholesky_inverse(t.linalg.cholesky(x @ x.mT + t.eye(3))),
    lambda t, x, a, b: t.mvlgamma(x.abs() + 2, 3),
])
def test_matrix_sums_and_cholesky_solves_as_pytorchs(call):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal((3, 3)), rng.standard_normal((3, 4)),
              rng.standard_normal((4, 3))]
    results = []
    for lib in (pargraph, torch):
        inputs = [lib.tensor(a, requires_grad=True) for a in arrays]
        out = call(lib, *inputs)
        grads = lib.autograd.grad((out * out).sum(), inputs, allow_unused=True)
        results.append((out.detach().numpy(), [None if g is None else g.numpy()
                                                for g in grads]))
    (ours, our_grads), (theirs, their_grads) = results
    np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)
    for a, b in zip(our_grads, their_grads):
        assert (a is None) == (b is None) or np.allclose(a if a is not None else b, 0)
        if a is not None and b is not None:
            np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)


def test_argwhere_nextafter_concat_and_in_place_products_as_pytorchs():
    torch = pytest.importorskip("torch")
    cases = [
        lambda t: t.argwhere(t.tensor([[0, 1], [1, 0]])),
        lambda t: t.nextafter(t.tensor([1.0, 0.0, -1.0]), t.tensor([2.0, -1.0, -1.0])),
        lambda t: t.concat([t.ones(1), t.zeros(2)]),
        lambda t: t.concatenate([t.ones(1, 1), t.zeros(1, 1)], axis=1),
        lambda t: t.addmv(t.tensor([float("nan")]), t.ones(1, 2), t.ones(2), beta=0),
        lambda t: t.zeros(2).addmv_(t.ones(2, 3), t.ones(3)),
        lambda t: t.zeros(2, 2).addr_(t.ones(2), t.arange(2.0)),
        lambda t: t.zeros(1, 1).addbmm_(t.ones(3, 1, 2), t.ones(3, 2, 1)),
        lambda t: t.zeros(1, 1).addmm_(t.ones(1, 2), t.ones(2, 1), alpha=2),
        lambda t: t.zeros(2, 1, 1).baddbmm_(t.ones(2, 1, 3), t.ones(2, 3, 1)),
        lambda t: t.tensor([0, 5]).bitwise_not_(), lambda t: t.tensor([0.5, 0.0]).logical_not_(),
    ]
    for case in cases:
        ours, theirs = case(pargraph), case(torch)
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
        assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    grads = []
    for t in (pargraph, torch):  # nextafter's gradients: 1 to its input, 0 to the other
        x = t.tensor([[1.0, -2.0]], requires_grad=True)
        y = t.tensor([[3.0], [0.0]], requires_grad=True)
        (t.nextafter(x, y) * t.tensor([2.0, 5.0])).sum().backward()
        grads.append((x.grad.numpy(), y.grad.numpy()))
    for ours, theirs in zip(*grads):
        np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("call, shapes", [
    (lambda t, x, s: t.diagonal_scatter(x, s, 1), [(3, 3), (2,)]),
    (lambda t, x, s: t.diagonal_scatter(x, s, -1), [(3, 4), (2,)]),
    (lambda t, x, s: t.diagonal_scatter(x, s, 0, 0, 2), [(3, 2, 4), (2, 3)]),
    (lambda t, x, s: t.diagonal_scatter(x, s, 1, 2, 0), [(3, 2, 4), (2, 2)]),
    (lambda t, x, s: t.select_scatter(x, s, 1, -1), [(3, 2, 4), (3, 4)]),
    (lambda t, x, s: x.slice_scatter(s, 2, 1, None, 2), [(3, 2, 5), (3, 2, 2)]),
    (lambda t, x, s: t.slice_scatter(x, s), [(3, 2), (3, 2)]),
])
def test_scatter_copies_as_pytorchs(call, shapes):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal(shape) for shape in shapes]
    results = []
    for lib in (pargraph, torch):
        inputs = [lib.tensor(a, requires_grad=True) for a in arrays]
        out = call(lib, *inputs)
        grads = lib.autograd.grad((out * out).sum(), inputs)
        results.append((out.detach().numpy(), [g.numpy() for g in grads]))
    (ours, our_grads), (theirs, their_grads) = results
    np.testing.assert_array_equal(ours, theirs)
    for a, b in zip(our_grads, their_grads):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    with pytest.raises(RuntimeError, match=r"src size = \[2, 3\], slice size = \[2, 2\]"):
        pargraph.diagonal_scatter(pargraph.zeros(3, 2, 4), pargraph.ones(2, 3), 1, 2, 0)


def test_binomial_and_poisson_draws():
    pargraph.manual_seed(0)
    counts = pargraph.full((20000,), 10.0, dtype=pargraph.float64)
    draws = pargraph.binomial(counts, pargraph.full((20000,), 0.3, dtype=pargraph.float64))
    assert draws.dtype == pargraph.float64 and not draws.requires_grad
    assert abs(float(draws.mean()) - 3.0) < 0.05 and float(draws.max()) <= 10
    assert pargraph.binomial(pargraph.tensor([5.0, 5.0]), pargraph.tensor([0.0, 1.0])).tolist() \
        == [0.0, 5.0]
    rates = pargraph.full((20000,), 3.0, requires_grad=True)
    draws = pargraph.poisson(rates)
    assert draws.dtype == pargraph.float32 and not draws.requires_grad
    assert abs(float(draws.mean()) - 3.0) < 0.05 and float(draws.var()) == pytest.approx(3.0,
                                                                                       rel=0.05)
    pargraph.manual_seed(1)
    first = pargraph.poisson(pargraph.full((5,), 4.0)).tolist()
    pargraph.manual_seed(1)
    assert pargraph.poisson(pargraph.full((5,), 4.0)).tolist() == first


@pytest.mark.parametrize("name", ["i0", "i0e", "i1", "i1e"])
def test_bessel_functions_and_two_derivatives_as_pytorchs(name):
    torch = pytest.importorskip("torch")
    x = np.array([0.0, 0.5, -1.5, 3.0, -7.0])
    results = []
    for lib in (pargraph, torch):
        t = lib.tensor(x, requires_grad=True)
        y = getattr(lib.special, name)(t)
        (g,) = lib.autograd.grad(y.sum(), [t], create_graph=True)
        (gg,) = lib.autograd.grad(g.sum(), [t])
        results.append([y.detach().numpy(), g.detach().numpy(), gg.numpy()])
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-14)
    if name == "i0":
        assert pargraph.tensor([1.0]).i0().item() == pytest.approx(torch.tensor([1.0]).i0().item())
        assert pargraph.i0(pargraph.tensor([1.0])).item() == pytest.approx(1.2660658)


def test_deepcopy_of_detached_data_snapshots_a_model_as_pytorchs():
    """``best = copy.deepcopy(model.state_dict())`` (early stopping's snapshot) of the state
    dict's detached data: the copies keep their values while training goes on, and loading
    them puts the model back, as in PyTorch; ``copy.copy`` shares."""
    import copy

    torch = pytest.importorskip("torch")
    seen = []
    for library in (pargraph, torch):
        model = library.nn.Linear(3, 2)
        with library.no_grad():
            model.weight.copy_(library.tensor([[1.0, -2.0, 0.5], [0.0, 1.0, 2.0]]))
            model.bias.copy_(library.tensor([0.25, -1.0]))
        opt = library.optim.SGD(model.parameters(), lr=0.1)
        best = copy.deepcopy(model.state_dict())
        for _ in range(2):
            opt.zero_grad()
            model(library.ones(4, 3)).pow(2).sum().backward()
            opt.step()
        trained = model.weight.detach().numpy().copy()
        model.load_state_dict(best)
        shared = copy.copy(model.weight.detach())
        with library.no_grad():
            shared.add_(1.0)
        seen.append((best["weight"].numpy(), trained, model.weight.detach().numpy(),
                     copy.deepcopy(model.weight.detach().requires_grad_()).requires_grad,
                     copy.deepcopy(model.weight.detach()).requires_grad))
    for ours, theirs in zip(*seen):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)


def test_shapes_and_dims_by_pytorchs_keywords():
    """Shapes and dims usually given as varargs (``x.view(2, 3)``) also by PyTorch's keyword
    (``x.view(size=(2, 3))``, ``torch.flip(x, dims=[1])``, ``torch.zeros(size=(2,))``), as in
    PyTorch. Given both ways, Python's error."""
    torch = pytest.importorskip("torch")
    calls = [
        lambda t, x: x.flip(dims=[0]), lambda t, x: t.flip(x, dims=[1]),
        lambda t, x: x.permute(dims=(1, 0)), lambda t, x: t.permute(x, dims=(1, 0)),
        lambda t, x: x.reshape(shape=(3, 2)), lambda t, x: t.reshape(x, shape=(6,)),
        lambda t, x: x.view(size=(3, 2)), lambda t, x: x[:1].expand(size=(2, 3)),
        lambda t, x: x.repeat(repeats=(2, 1)), lambda t, x: x.new_zeros(size=(2,)),
        lambda t, x: x.new_ones(size=(2, 1)), lambda t, x: x.new_empty(size=(2,)) * 0,
        lambda t, x: t.zeros(size=(2,)), lambda t, x: t.ones(size=(2, 2)),
        lambda t, x: t.empty(size=(2,)) * 0, lambda t, x: t.rand(size=(2,)) * 0,
        lambda t, x: t.randn(size=(3,)) * 0,
    ]
    for call in calls:
        ours = call(pargraph, pargraph.arange(6.0).reshape(2, 3))
        theirs = call(torch, torch.arange(6.0).reshape(2, 3))
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    for library in (pargraph, torch):
        with pytest.raises(TypeError):
            library.zeros(2, size=(2,))
        with pytest.raises(TypeError):
            library.arange(6.0).view(2, 3, shape=(6,))


VIEW_CHANGES = [
    lambda t, x: x[0].zero_(), lambda t, x: x[:, 1:].fill_(7), lambda t, x: x[..., 0].zero_(),
    lambda t, x: x.narrow(1, 0, 1).sub_(1), lambda t, x: x.select(0, 1).copy_(t.ones(3) * 9),
    lambda t, x: x.unbind(0)[1].mul_(0), lambda t, x: x[1][2].fill_(50),
    lambda t, x: x[None, 1, ::2].add_(5), lambda t, x: x.chunk(3, 1)[2].zero_(),
    lambda t, x: x.split([1, 2], dim=-1)[1].mul_(-1), lambda t, x: x.split(1)[1].add_(10),
    lambda t, x: x.view(-1).add_(1), lambda t, x: x.T.mul_(2), lambda t, x: x.t()[2].mul_(10),
    lambda t, x: x.reshape(3, 2)[0].fill_(-1), lambda t, x: x.unsqueeze(0).sub_(1),
    lambda t, x: x.flatten()[::2].zero_(), lambda t, x: x.transpose(0, 1)[1].fill_(4),
    lambda t, x: x.permute(1, 0).mul_(t.tensor([[1.0, 2.0]])), lambda t, x: x.mT[0].add_(9),
    lambda t, x: x[None].squeeze(0)[1].zero_(),
    lambda t, x: x.diagonal().fill_(-5), lambda t, x: x.diagonal(1).mul_(10),
    lambda t, x: x.diagonal(-1, 1, 0).add_(100), lambda t, x: t.diagonal(x, offset=2).zero_(),
    lambda t, x: x.view(t.int32)[0].fill_(0), lambda t, x: x.view(t.float16)[1, 1:3].zero_(),
    lambda t, x: x[[0]].zero_(),  # a copy: x stays
    lambda t, x: x[x > 2].fill_(0),  # a copy too
]


@pytest.mark.parametrize("change", VIEW_CHANGES)
def test_in_place_changes_of_an_indexed_view_reach_its_tensor_as_in_pytorch(change):
    """``w[0].zero_()`` (an embedding's padding row), ``x[:, 1:].fill_(7)``, ``narrow``,
    ``select``, ``unbind``, ``split``, ``view``, ``T``, ``permute``...: views whose in-place
    changes reach the tensor, as PyTorch's. Index tensors and masks give copies."""
    torch = pytest.importorskip("torch")
    results = []
    for library in (pargraph, torch):
        x = library.arange(6.0).reshape(2, 3)
        with library.no_grad():
            change(library, x)
        results.append(x.numpy())
    np.testing.assert_array_equal(*results)


def test_a_view_changed_in_place_backpropagates_and_a_leafs_is_refused_as_in_pytorch():
    torch = pytest.importorskip("torch")
    grads = []
    for library in (pargraph, torch):
        leaf = library.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        a = leaf * 2
        a[0].mul_(library.tensor([3.0, 5.0]))  # a view of a non-leaf changed in place
        a.view(-1).add_(library.tensor([1.0, 2.0, 3.0, 4.0]) * a.T.reshape(-1))
        (a * library.tensor([[1.0, 10.0], [100.0, 1000.0]])).sum().backward()
        grads.append(leaf.grad.numpy())
        weight = library.nn.Embedding(4, 2, padding_idx=0).weight
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            weight[0].zero_()
        with library.no_grad():
            weight.data[0].fill_(1.0)
            library.nn.init.zeros_(weight[1])
        assert weight[0].tolist() == [1.0, 1.0] and weight[1].tolist() == [0.0, 0.0]
    np.testing.assert_array_equal(*grads)


def test_a_diagonal_changed_in_place_backpropagates_as_in_pytorch():
    grads = []
    for library in (pargraph, torch):
        leaf = library.arange(1.0, 10.0).reshape(3, 3).requires_grad_()
        a = leaf * 2
        a.diagonal().mul_(a.diagonal(1).sum())
        (a * library.arange(9.0).reshape(3, 3)).sum().backward()
        grads.append(leaf.grad.numpy())
    np.testing.assert_array_equal(*grads)


def test_view_as_another_dtype_reads_the_same_bytes_as_in_pytorch():
    seen = []
    for library in (pargraph, torch):
        x = library.tensor([[1.0, -2.0, 3.5, 0.25]])
        results = [x.view(library.int32), x.view(library.float16), x.view(library.float64),
                   x.view(dtype=library.uint8), library.tensor([1, 2], dtype=library.int16)
                   .view(library.int32), x.view(library.float32)]
        seen.append([(str(r.dtype).split(".")[-1], tuple(r.shape), r.tolist())
                     for r in results])
        messages = []
        for bad in (lambda: library.tensor([1.0, 2.0, 3.0]).view(library.float64),
                    lambda: library.tensor(1.0).view(library.float16)):
            with pytest.raises(RuntimeError) as caught:
                bad()
            messages.append(str(caught.value))
        seen[-1].append(messages)
    ours, theirs = seen[0].pop(), seen[1].pop()
    assert seen[0] == seen[1]
    assert all(o == f"view_dtype: {t}" for o, t in zip(ours, theirs))  # ours names the op


def test_as_strided_mean_of_integers_and_max_of_nothing_as_in_pytorch():
    seen = []
    for library in (pargraph, torch):
        x = library.arange(12.0)
        strided = [x.as_strided((3, 3), (1, 3)), x.as_strided((2, 2), (4, 1), 2),
                   library.as_strided(x, (4,), (3,))]
        with pytest.raises(RuntimeError) as out_of_bounds:
            x.as_strided((2, 4), (6, 2), 1)
        with pytest.raises(RuntimeError) as integers:
            library.tensor([1, 2]).mean()
        with pytest.raises(RuntimeError) as nothing:
            library.empty(0).max()
        seen.append([[r.tolist() for r in strided], str(out_of_bounds.value),
                     library.tensor([1, 2]).mean(dtype=library.float64).item(),
                     str(integers.value), str(nothing.value)])
    assert seen[0] == seen[1]


def test_as_strided_is_differentiable():
    x = pargraph.arange(6.0, dtype=pargraph.float64).requires_grad_()
    (x.as_strided((2, 3), (1, 2)) ** 2).sum().backward()
    # element k is read (k <= 4: k // 2 + k % 2 times at most) as often as the windows cover it
    counts = np.bincount((np.arange(2)[:, None] + np.arange(3)[None] * 2).ravel(), minlength=6)
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.arange(6.0) * counts)


def test_tensors_pickle_as_pytorchs():
    """A tensor pickles as its values and ``requires_grad``: a non-leaf comes back a leaf, a
    view a tensor of its own, a Parameter a Parameter; a module's deepcopy copies its
    buffers' values."""
    import copy
    import pickle

    torch = pytest.importorskip("torch")
    seen = []
    for library in (pargraph, torch):
        x = library.tensor([1.0, -2.0], requires_grad=True)
        tensors = [x, x * 3, library.arange(6).reshape(2, 3)[1],
                   library.nn.Parameter(library.ones(2)), library.ones(2, dtype=library.bfloat16)]
        back = [pickle.loads(pickle.dumps(t)) for t in tensors]
        seen.append([(type(t).__name__, t.requires_grad, t.grad_fn is None,
                      str(t.dtype).split(".")[-1],
                      t.detach().float().tolist()) for t in back])
        norm = library.nn.BatchNorm1d(2)
        norm(library.tensor([[1.0, 2.0], [3.0, 5.0]]))
        copied = copy.deepcopy(norm)
        norm.running_mean.add_(1.0)
        seen[-1].append(copied.running_mean.tolist())
    assert seen[0] == seen[1]


def test_autograd_edges_as_in_pytorch():
    """``autograd.grad``'s unused inputs (the index in the message, ``materialize_grads``),
    atan2's gradient at the origin, and PyTorch's warnings for a computed tensor's ``.grad``
    and a variance over too few elements."""
    import warnings

    seen = []
    for library in (pargraph, torch):
        x = library.tensor([1.0, 2.0], requires_grad=True)
        unused = library.ones(1, requires_grad=True)
        with pytest.raises(RuntimeError) as not_used:
            library.autograd.grad((x * 2).sum(), [x, unused])
        zeros = library.autograd.grad((x * 2).sum(), [x, unused], materialize_grads=True)[1]
        with pytest.raises(ValueError, match="allow_unused to be True or not passed"):
            library.autograd.grad((x * 2).sum(), [x, unused], allow_unused=False,
                                  materialize_grads=True)
        y = library.tensor([0.0, 1.0], requires_grad=True)
        other = library.tensor([0.0, -2.0], requires_grad=True)
        library.atan2(y, other).sum().backward()
        with pytest.raises(RuntimeError) as integers:
            library.tensor([1, 2], requires_grad=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            computed = x * 2
            assert computed.grad is None
            assert library.tensor([3.0]).std().isnan().item()
            library.tensor([[1.0, 2.0]]).var(dim=0)
            library.tensor([1.0, 2.0]).std()  # no warning
        seen.append([str(not_used.value), zeros.tolist(), y.grad.tolist(), other.grad.tolist(),
                     str(integers.value), [str(w.message)[:60] for w in caught]])
    assert seen[0] == seen[1]


def test_memory_formats_none_comparisons_and_numpy_ufuncs_as_in_pytorch():
    import warnings

    seen = []
    for library in (pargraph, torch):
        x = library.arange(16.0).reshape(1, 1, 4, 4)
        layer = library.nn.Conv2d(1, 2, 3).to(memory_format=library.channels_last)
        formatted = [x.to(memory_format=library.channels_last),
                     x.clone(memory_format=library.contiguous_format),
                     x.contiguous(memory_format=library.channels_last),
                     library.zeros_like(x, memory_format=library.preserve_format),
                     library.empty_like(x, memory_format=library.channels_last)]
        with pytest.raises(RuntimeError) as ambiguous:
            bool(library.ones(2))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # torch's __array_wrap__
            ufuncs = [np.exp(library.tensor([0.0, 1.0])), np.isnan(library.tensor([1.0])),
                      np.add(library.tensor([1, 2]), 3)]
        seen.append([tuple(layer(x).shape), [tuple(t.shape) for t in formatted],
                     x == None, x != None,  # noqa: E711  (what such programs write)
                     str(ambiguous.value),
                     [(type(u).__name__, str(u.dtype).split(".")[-1], u.tolist())
                      for u in ufuncs]])
    assert seen[0] == seen[1]


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int8", "int32", "int64"])
def test_float_valued_ops_of_integers_compute_in_float_as_pytorchs(dtype):
    """sigmoid of integers gave zeros, and a bool's exp was computed in float16: the inputs
    of float-valued elementwise ops are cast to the op's float dtype first."""
    seen = []
    for library in (pargraph, torch):
        x = library.tensor([0, 1, 1], dtype=getattr(library, dtype))
        y = library.tensor([0.5, 2.0, 3.0], dtype=library.float64)
        results = [x.sigmoid(), x.exp().double() - np.e * x.double(), x.tanh(), x.log1p(),
                   library.atan2(x, y)]
        with pytest.raises(RuntimeError) as in_place:
            library.tensor([0, 1], dtype=getattr(library, dtype)).sigmoid_()
        seen.append(([(str(r.dtype).split(".")[-1], r.tolist()) for r in results],
                     str(in_place.value)))
    for (dt_ours, ours), (dt_theirs, theirs) in zip(seen[0][0], seen[1][0]):
        assert dt_ours == dt_theirs
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-6)
    assert seen[0][1] == seen[1][1]


def test_clamp_by_tensors_where_alone_and_refused_integer_ops_as_in_pytorch():
    seen = []
    for library in (pargraph, torch):
        x = library.tensor([[0.0, 5.0, 3.0, float("nan")], [9.0, -1.0, 2.0, 2.0]],
                           requires_grad=True)
        low = library.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
        high = library.tensor(4.5, requires_grad=True)
        clamped = x.clamp(low, high)
        (clamped * library.arange(8.0).reshape(2, 4)).sum().backward()
        messages = []
        for bad in (lambda: -library.tensor([True]), lambda: library.tensor([2]) ** -1,
                    lambda: library.ones(2).clamp(min=library.zeros(2), max=1.0)):
            with pytest.raises((RuntimeError, TypeError)) as caught:
                bad()
            messages.append(type(caught.value).__name__)
        seen.append([clamped.detach().numpy().tolist(), x.grad.tolist(), low.grad.tolist(),
                     high.grad.item(),
                     [t.tolist() for t in library.where(library.tensor([[0, 1], [1, 0]]))],
                     library.tensor([True, False]).sign().tolist(), messages])
    ours, theirs = seen
    np.testing.assert_equal(ours[0], theirs[0])  # NaN in place
    assert ours[1:] == theirs[1:]


def test_trace_of_a_matrix_and_trace_of_a_run_share_the_name():
    matrix = np.arange(9.0).reshape(3, 3)
    assert pargraph.trace(pargraph.tensor(matrix)).item() == torch.trace(
        torch.tensor(matrix)).item() == 12.0
    with pargraph.trace() as tr:
        pargraph.tensor(matrix).exp().sum().item()
    assert {r.op for r in tr.nodes()} >= {"exp"}


def test_inference_mode_is_reported_as_in_pytorch():
    seen = []
    for library in (pargraph, torch):
        states = [library.is_inference_mode_enabled()]
        with library.inference_mode():
            states.append((library.is_inference_mode_enabled(), library.is_grad_enabled()))
            with library.inference_mode(False):
                states.append((library.is_inference_mode_enabled(), library.is_grad_enabled()))
            states.append(library.is_inference_mode_enabled())

        @library.inference_mode()
        def inside():
            return library.is_inference_mode_enabled(), library.is_grad_enabled()

        states += [inside(), library.is_inference_mode_enabled()]
        seen.append(states)
    assert seen[0] == seen[1]


def test_ragged_nested_lists_are_refused_as_in_pytorch():
    for ragged in ([[1, 2], [3]], [[[1], [2, 3]]], [[1.0, 2.0], [3.0, 4.0], [5.0]]):
        with pytest.raises(ValueError) as theirs:
            torch.tensor(ragged)
        with pytest.raises(ValueError) as ours:
            pargraph.tensor(ragged)
        assert str(ours.value) == str(theirs.value)
    for mixed in ([[1, 2], 3], [1, [2]]):
        with pytest.raises(TypeError):
            torch.tensor(mixed)
        with pytest.raises(TypeError, match="expected a sequence at dim 1"):
            pargraph.tensor(mixed)


def test_float_of_a_tensor_that_requires_grad_warns_as_pytorchs(request):
    messages = []
    always = torch.is_warn_always_enabled()
    torch.set_warn_always(True)  # PyTorch warns once per process, else
    request.addfinalizer(lambda: torch.set_warn_always(always))
    for library in (pargraph, torch):
        w = library.ones((), requires_grad=True)
        with pytest.warns(UserWarning, match="requires_grad=True to a scalar") as seen:
            assert float(w * 2) == 2.0
        messages.append(str(seen[0].message).split(" (Triggered")[0])
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            float((w * 2).detach()), (w * 2).item(), int(w), f"{w * 2:.1f}"
    assert messages[0] == messages[1]


def _both(fn, *arrays, grad=False):
    """``fn(library, *tensors)`` in pargraph and in torch, on float64 copies of ``arrays``;
    with ``grad``, the gradients of the result's sum too."""
    found = []
    for library in (pargraph, torch):
        tensors = [library.tensor(a, requires_grad=grad and a.dtype.kind == "f")
                   for a in arrays]
        out = fn(library, *tensors)
        outs = out if isinstance(out, tuple) else (out,)
        values = [o.detach().numpy() for o in outs]
        if grad:
            sum(o.sum() for o in outs).backward()
            values += [t.grad.numpy() if t.grad is not None else np.zeros(t.shape)
                       for t in tensors if t.requires_grad]
        found.append(values)
    for ours, theirs in zip(*found):
        assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)


def test_gradient_angle_narrow_copy_and_counted_repeats_are_pytorchs():
    rng = np.random.default_rng(5)
    f = rng.standard_normal((4, 5))
    coordinates = np.array([0.0, 0.5, 1.75, 2.0, 3.5])
    for options in ({}, {"dim": 1, "edge_order": 2}, {"spacing": [2.0, 0.5]},
                    {"spacing": 3.0, "dim": (-1,)}):
        _both(lambda lib, t, o=options: lib.gradient(t, **o), f, grad=True)
    _both(lambda lib, t, c: lib.gradient(t, spacing=(c,), dim=1, edge_order=2), f,
          coordinates, grad=True)
    _both(lambda lib, t: lib.gradient(t), np.array([1, 4, 9, 16]))  # integers: floats
    for options, error in (({"edge_order": 3}, "edge_order=1 and edge_order=2"),
                           ({"dim": 0, "edge_order": 2}, "at least edge_order\\+1")):
        for library in (pargraph, torch):
            with pytest.raises(RuntimeError, match=error):
                library.gradient(library.ones(2, 3), **options)
    signs = np.array([-2.0, 0.0, -0.0, 3.0, np.nan, -np.inf])
    _both(lambda lib, t: (lib.angle(t), t.angle()), signs[:4], grad=True)
    _both(lambda lib, t: lib.angle(t), signs)
    _both(lambda lib, t: lib.angle(t), np.array([-1, 0, 2]))
    _both(lambda lib, t: (lib.narrow_copy(t, 1, 1, 3), t.narrow_copy(0, 2, 2)), f, grad=True)
    _both(lambda lib, t: lib.repeat_interleave(t), np.array([2, 0, 3, 1]))
    for norm in (0, -1, -2.5, 0.5):
        _both(lambda lib, t, p=norm: (t.norm(p), t.norm(p, dim=1), lib.linalg.vector_norm(t, p)),
              np.array([[0.0, 1.5, -2.0], [0.0, 0.0, 3.0]]))


def test_index_reduce_and_scatters_older_reduce_are_pytorchs(request):
    always = torch.is_warn_always_enabled()
    torch.set_warn_always(True)  # PyTorch warns once per process, else
    request.addfinalizer(lambda: torch.set_warn_always(always))
    rng = np.random.default_rng(6)
    base, source = rng.standard_normal((4, 3)), rng.standard_normal((5, 3))
    index = np.array([0, 2, 0, 3, 2])
    for reduce in ("prod", "mean", "amax", "amin"):
        for include_self in (True, False):
            def call(lib, x, s, i, r=reduce, keep=include_self):
                with pytest.warns(UserWarning, match="index_reduce\\(\\) is in beta"):
                    return (x.index_reduce(0, i, s, r, include_self=keep),
                            x.T.index_reduce(1, i, s.T, r, include_self=keep))
            _both(call, base, source, index, grad=reduce != "prod")
    _both(lambda lib, x, s, i: x.index_reduce(0, i, s, "mean"), np.ones(3, np.int64),
          np.array([2, 3]), np.array([0, 0]))
    for library in (pargraph, torch):
        with pytest.raises(RuntimeError, match="one of prod, mean"):
            library.ones(3).index_reduce(0, library.tensor([0]), library.ones(1), "sum")
        with pytest.raises(RuntimeError, match="Number of indices"):
            library.ones(3, 2).index_reduce(0, library.tensor([0, 1]), library.ones(1, 2),
                                            "prod")
    where = np.array([[0], [2]])
    _both(lambda lib, x, i: x.scatter(1, i, 2.5, reduce="multiply"), np.ones((2, 3)), where)
    for reduce in ("add", "multiply"):
        def older(lib, x, s, i, r=reduce):
            with pytest.warns(UserWarning, match="reduce argument of torch.scatter"):
                return x.scatter(1, i, s, reduce=r)
        _both(older, np.full((2, 3), 2.0), np.array([[3.0], [4.0]]), where)
    for library in (pargraph, torch):
        with pytest.raises(RuntimeError, match="either add or multiply"):
            library.ones(2, 3).scatter(1, library.tensor([[0], [2]]), 2.0, reduce="mean")


def test_tensorinv_tensorsolve_and_linalg_vander_are_pytorchs():
    rng = np.random.default_rng(7)
    a = rng.standard_normal((6, 6)) + 6 * np.eye(6)
    _both(lambda lib, t: lib.linalg.tensorinv(t.reshape(6, 2, 3), ind=1), a, grad=True)
    _both(lambda lib, t: lib.linalg.tensorinv(t.reshape(2, 3, 6)), a, grad=True)
    b = rng.standard_normal((2, 3))
    _both(lambda lib, t, y: lib.linalg.tensorsolve(t.reshape(2, 3, 6), y), a, b, grad=True)
    _both(lambda lib, t, y: lib.linalg.tensorsolve(t.reshape(6, 2, 3), y, dims=(0,)), a, b,
          grad=True)
    _both(lambda lib, t: lib.linalg.vander(t), rng.standard_normal((2, 3)), grad=True)
    _both(lambda lib, t: lib.linalg.vander(t, N=4), np.array([1, 2, 3]))
    for call, error in ((lambda lib: lib.linalg.tensorinv(lib.ones(4, 2, 2), ind=2), "2 != 8"),
                        (lambda lib: lib.linalg.tensorinv(lib.ones(4, 2, 2), ind=0),
                         "strictly positive"),
                        (lambda lib: lib.linalg.tensorsolve(lib.ones(4, 2, 3), lib.ones(4)),
                         "6 != 4"),
                        (lambda lib: lib.linalg.vander(lib.ones(2), N=1), "greater than 1")):
        for library in (pargraph, torch):
            with pytest.raises(RuntimeError, match=error):
                call(library)


def test_drawing_with_replacement_is_a_node_that_realizes_nothing_and_matches_the_weights():
    """``multinomial(n, replacement=True)`` (``Categorical.sample``) records a draw instead
    of realizing the weights: a policy's step (forward, sample, log_prob) runs once, at its
    ``.item()``. Generated weights' frequencies match them; bad weights raise PyTorch's
    errors, at the call when they are known and in the task when they are computed."""
    rng = np.random.default_rng(6)
    for k in range(6):
        weights = rng.random((int(rng.integers(1, 4)), int(rng.integers(2, 6)))) ** 3
        weights[0, int(rng.integers(weights.shape[1]))] = 0.0  # a category never drawn
        pargraph.manual_seed(k)
        lazy = pargraph.tensor(weights, requires_grad=True) * 1.0
        drawn = lazy.multinomial(40000, replacement=True)
        assert drawn._node.value is None and lazy._node.value is None
        counts = np.stack([np.bincount(row, minlength=weights.shape[1]) for row in
                           drawn.numpy()]) / 40000
        np.testing.assert_allclose(counts, weights / weights.sum(1, keepdims=True), atol=0.01)
        assert (counts[weights == 0] == 0).all()
    policy = pargraph.distributions.Categorical(probs=pargraph.tensor([[0.3, 0.7]]) * 1.0)
    action = policy.sample()
    log_prob = policy.log_prob(action)
    assert action._node.value is None and log_prob._node.value is None
    assert action.item() in (0, 1)
    with pytest.raises(RuntimeError, match="sum of probabilities <= 0"):
        pargraph.tensor([[0.0, 0.0]]).multinomial(2, replacement=True)
    with pytest.raises(RuntimeError, match="`inf`, `nan` or element < 0"):
        pargraph.tensor([1.0, -1.0]).multinomial(2, replacement=True)
    computed = (pargraph.tensor([1.0, 2.0]) * float("nan")).multinomial(2, replacement=True)
    with pytest.raises(RuntimeError, match="`inf`, `nan` or element < 0"):
        computed.tolist()
