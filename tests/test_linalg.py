"""pargraph.linalg and the matrix functions at the top level against torch 2.13: values and
float64 gradients (eigenvectors through sign-free functions of them), batches and
broadcasting, vector right-hand sides, every matrix norm, and PyTorch's errors."""

import re

import numpy as np
import pytest

import pargraph

torch = pytest.importorskip("torch")  # the test extra installs the CPU build

RNG = np.random.default_rng(0)
A = RNG.standard_normal((2, 3, 3))
SPD = A @ A.transpose(0, 2, 1) + np.eye(3)
B = RNG.standard_normal((2, 3, 2))
M = RNG.standard_normal((3, 4))
V = RNG.standard_normal(3)


def both(call, *arrays, grad=True):
    """``call(library, *tensors)`` in pargraph and in torch: the same shapes and values, and
    the same gradients of a weighted sum of the results."""
    ours_in = [pargraph.tensor(a, requires_grad=grad) for a in arrays]
    theirs_in = [torch.tensor(a, requires_grad=grad) for a in arrays]
    ours, theirs = call(pargraph, *ours_in), call(torch, *theirs_in)
    ours, theirs = (ours, theirs) if isinstance(theirs, tuple) else ((ours,), (theirs,))
    for a, b in zip(ours, theirs):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-9,
                                   atol=1e-12)
    if grad:
        weights = [RNG.standard_normal(tuple(b.shape)) for b in theirs]
        sum((a * pargraph.tensor(w)).sum() for a, w in zip(ours, weights)
            if a.requires_grad).backward()
        sum((b * torch.tensor(w)).sum() for b, w in zip(theirs, weights)
            if b.requires_grad).backward()
        for a, b in zip(ours_in, theirs_in):
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("call", [
    lambda lib, a: lib.linalg.inv(a), lambda lib, a: lib.inverse(a),
    lambda lib, a: a.inverse(), lambda lib, a: lib.linalg.det(a), lambda lib, a: a[0].det(),
    lambda lib, a: lib.linalg.slogdet(a), lambda lib, a: lib.slogdet(a),
    lambda lib, a: lib.linalg.svdvals(a), lambda lib, a: lib.linalg.svdvals(a[..., :2]),
    lambda lib, a: lib.linalg.eigvalsh(a), lambda lib, a: lib.linalg.eigvalsh(a, "U"),
    lambda lib, a: lib.linalg.diagonal(a, offset=1),
    lambda lib, a: lib.linalg.cross(a, a.flip(0)),
    lambda lib, a: lib.linalg.vecdot(a, a.flip(1)),
], ids=["inv", "inverse", "inverse_method", "det", "det_method", "slogdet", "slogdet_top",
        "svdvals", "svdvals_wide", "eigvalsh", "eigvalsh_upper", "diagonal", "cross",
        "vecdot"])
def test_functions_of_matrices_as_pytorchs(call):
    both(call, A)


def test_logdet_and_eigh_as_pytorchs():
    both(lambda lib, a: lib.logdet(a), SPD)
    both(lambda lib, a: a.logdet(), A)  # a negative determinant: NaN, as PyTorch's

    def sign_free(lib, a):
        w, v = lib.linalg.eigh(a)
        return w, v @ lib.diag_embed(w.exp()) @ v.transpose(-1, -2), v * v

    both(sign_free, SPD)
    assert type(pargraph.linalg.eigh(pargraph.tensor(SPD))).__name__ == "linalg_eigh"


@pytest.mark.parametrize("n", [-3, -1, 0, 1, 2, 5])
def test_matrix_power_as_pytorchs(n):
    both(lambda lib, a: lib.linalg.matrix_power(a, n), A, grad=n != 0)
    both(lambda lib, a: a.matrix_power(n), A, grad=n != 0)


def test_solve_and_multi_dot_as_pytorchs():
    both(lambda lib, a, b: lib.linalg.solve(a, b), A, B)
    both(lambda lib, a, b: lib.linalg.solve(a, b[0, :, 0]), A, B)  # a vector
    both(lambda lib, a, b: lib.linalg.solve(a, b[:, :, 0]), A, B)  # a batch of vectors
    both(lambda lib, a, b: lib.linalg.solve(a[0], b), A, B)  # broadcast
    both(lambda lib, a, b: lib.linalg.solve(a, b.transpose(-1, -2), left=False), A, B)
    both(lambda lib, a, m, v: lib.linalg.multi_dot([v, a[0], m]), A, M, V)
    both(lambda lib, a, m: lib.linalg.multi_dot([a[0], a[1], m]), A, M)


@pytest.mark.parametrize("ord", ["fro", "nuc", 1, -1, 2, -2, float("inf"), float("-inf")])
def test_every_matrix_norm_as_pytorchs(ord):
    for dim in ((-2, -1), (0, 2), (2, 1)):
        for keepdim in (False, True):
            both(lambda lib, a: lib.linalg.matrix_norm(a, ord, dim, keepdim), A)
    both(lambda lib, m: lib.linalg.norm(m, ord), M)


@pytest.mark.parametrize("call", [
    lambda lib: lib.linalg.inv(lib.zeros(3, 3)),
    lambda lib: lib.linalg.inv(lib.tensor([[1.0, 2.0], [2.0, 4.0]])),
    lambda lib: lib.linalg.inv(lib.zeros(2, 3, 3)),
    lambda lib: lib.linalg.inv(lib.ones(3, 3, dtype=lib.int64)),
    lambda lib: lib.linalg.solve(lib.zeros(3, 3), lib.ones(3)),
    lambda lib: lib.linalg.solve(lib.eye(3), lib.ones(4)),
    lambda lib: lib.linalg.det(lib.ones(2, 3)), lambda lib: lib.linalg.det(lib.ones(3)),
    lambda lib: lib.linalg.matrix_power(lib.ones(2, 3), 2),
    lambda lib: lib.linalg.matrix_norm(lib.ones(3)),
    lambda lib: lib.linalg.matrix_norm(lib.ones(2, 2), 3),
    lambda lib: lib.linalg.eigh(lib.ones(2, 3)),
    lambda lib: lib.linalg.multi_dot([lib.ones(2)]),
])
def test_errors_are_pytorchs(call):
    def raised(library):
        with pytest.raises(Exception) as caught:
            call(library).detach().numpy()  # a singular matrix is found when it runs
        return type(caught.value).__name__.lstrip("_"), str(caught.value).split("\n")[0]

    ours, theirs = raised(pargraph), raised(torch)
    assert ours[0] == theirs[0]
    assert re.sub(r"torch\.", "", ours[1]) == re.sub(r"torch\.", "", theirs[1])


def test_a_singular_matrix_found_in_a_task_names_the_users_line():
    a = pargraph.zeros(2, 2) * 1  # its values are known only in the run
    inverse = pargraph.linalg.inv(a)
    with pytest.raises(pargraph.linalg.LinAlgError, match="singular") as caught:
        inverse.numpy()
    assert "test_linalg.py" in str(caught.value)


TALL, WIDE = RNG.standard_normal((2, 5, 3)), RNG.standard_normal((3, 5))


def _sign_free_svd(lib, a, full_matrices=False):
    """The singular values and sign-free functions of the singular vectors."""
    u, s, vh = lib.linalg.svd(a, full_matrices=full_matrices)
    k = s.shape[-1]
    return s, u[..., :k].abs(), vh[..., :k, :].abs(), u.shape[-1], vh.shape[-2]


@pytest.mark.parametrize("array", [TALL, WIDE, A], ids=["tall", "wide", "square"])
@pytest.mark.parametrize("full", [False, True])
def test_svd_as_pytorchs(array, full):
    both(lambda lib, a: _sign_free_svd(lib, a, full)[:3], array)
    ours = _sign_free_svd(pargraph, pargraph.tensor(array), full)
    theirs = _sign_free_svd(torch, torch.tensor(array), full)
    assert ours[3:] == theirs[3:]
    u, s, vh = pargraph.linalg.svd(pargraph.tensor(array), full_matrices=full)
    k = s.shape[-1]
    np.testing.assert_allclose(((u[..., :k] * s.unsqueeze(-2)) @ vh[..., :k, :]).numpy(),
                               array, atol=1e-12)
    u_old, s_old, v_old = pargraph.svd(pargraph.tensor(array), some=not full)
    np.testing.assert_allclose(v_old.numpy(), vh.mT.numpy())


@pytest.mark.parametrize("array", [TALL, WIDE, A], ids=["tall", "wide", "square"])
def test_qr_as_pytorchs(array):
    both(lambda lib, a: tuple(lib.linalg.qr(a)), array)
    if array.shape[-2] <= array.shape[-1]:
        both(lambda lib, a: tuple(lib.linalg.qr(a, mode="complete")), array)
    both(lambda lib, a: lib.linalg.qr(a, mode="r").R, array, grad=False)
    q, r = pargraph.qr(pargraph.tensor(array), some=False)
    assert tuple(q.shape[-2:]) == (array.shape[-2],) * 2
    for lib in (pargraph, torch):
        tall = lib.tensor(TALL, requires_grad=True)
        with pytest.raises(RuntimeError, match="not differentiable when mode='complete' and "
                                               "nrows > ncols"):
            lib.linalg.qr(tall, mode="complete").Q.sum().backward()
            tall.grad.numpy()


@pytest.mark.parametrize("array", [TALL, WIDE, A], ids=["tall", "wide", "square"])
def test_pinv_lstsq_rank_and_cond_as_pytorchs(array):
    both(lambda lib, a: lib.linalg.pinv(a), array)
    both(lambda lib, a: lib.pinverse(a), array)
    both(lambda lib, a: lib.linalg.matrix_rank(a), array, grad=False)
    both(lambda lib, a: lib.linalg.cond(a), array)
    if array.shape[-2] == array.shape[-1]:
        for p in ("fro", "nuc", 1, -1, float("inf"), -2):  # (torch's own gradient raises)
            both(lambda lib, a, p=p: lib.linalg.cond(a, p), array, grad=False)
        both(lambda lib, a: lib.linalg.pinv(a @ a.mT, hermitian=True), array)
    if array.shape[-2] >= array.shape[-1]:
        rhs = RNG.standard_normal(array.shape[:-1] + (2,))
        for driver in ("gelsy", "gelsd", "gelss", "gels"):
            both(lambda lib, a, b, d=driver: tuple(lib.linalg.lstsq(a, b, driver=d)), array,
                 rhs, grad=False)
        both(lambda lib, a, b: lib.linalg.lstsq(a, b).solution, array, rhs)


def test_rank_deficient_matrices_as_pytorchs():
    low = RNG.standard_normal((4, 2)) @ RNG.standard_normal((2, 3))
    both(lambda lib, a: lib.linalg.matrix_rank(a), low, grad=False)
    both(lambda lib, a: lib.linalg.pinv(a), low, grad=False)
    both(lambda lib, a: lib.linalg.matrix_rank(a, atol=1.0, rtol=0.0), low, grad=False)
    # The nonzero values' gradient: no 0 / 0 (the zero one's vectors are LAPACK's choice)
    both(lambda lib, a: lib.linalg.svd(a).S[:2], low)
    vector = RNG.standard_normal(4)
    both(lambda lib, a, b: lib.linalg.lstsq(a, b).solution, TALL[0][:4], vector)
    # Repeated singular values: the vectors' terms divide 0 by 0 when only S is used
    both(lambda lib, a: lib.linalg.svd(a).S, 2 * np.eye(3))


def test_geqrf_and_householder_product_as_pytorchs():
    both(lambda lib, a: tuple(lib.geqrf(a)), TALL, grad=False)
    a, tau = (t.numpy() for t in pargraph.geqrf(pargraph.tensor(TALL)))
    both(lambda lib, a, tau: lib.linalg.householder_product(a, tau), a, tau)
    both(lambda lib, a, tau: lib.linalg.householder_product(a, tau), a, tau[..., :2])
    for lib in (pargraph, torch):
        with pytest.raises(RuntimeError, match="input.shape\\[-2\\] must be greater than or "
                                               "equal to input.shape\\[-1\\]"):
            lib.linalg.householder_product(lib.tensor(WIDE), lib.ones(3, dtype=lib.float64))


NOT_PD = np.array([[[4.0, 2.0], [2.0, 3.0]], [[1.0, 2.0], [2.0, 1.0]], [[4.0, 2.0], [2.0, 1.0]]])
SINGULAR = np.array([[[1.0, 2.0], [2.0, 4.0]], [[2.0, 1.0], [1.0, 3.0]]])


def test_cholesky_ex_inv_ex_and_solve_ex_as_pytorchs():
    both(lambda t, a: t.linalg.cholesky_ex(a), SPD)
    both(lambda t, a: t.linalg.cholesky_ex(a, upper=True), SPD)
    both(lambda t, a: t.linalg.inv_ex(a), A)
    both(lambda t, a, b: t.linalg.solve_ex(a, b), A, B)
    both(lambda t, a, b: t.linalg.solve_ex(a, b[..., 0]), A, B)
    both(lambda t, a, b: t.linalg.solve_ex(a, b.mT, left=False), A, B)
    # What failed: the info, and the factor LAPACK left, without raising.
    ours = pargraph.linalg.cholesky_ex(pargraph.tensor(NOT_PD))
    theirs = torch.linalg.cholesky_ex(torch.tensor(NOT_PD))
    assert ours.info.tolist() == theirs.info.tolist() == [0, 2, 2]
    assert ours.info.dtype == pargraph.int32
    np.testing.assert_allclose(ours.L.numpy(), theirs.L.numpy())
    inverse = pargraph.linalg.inv_ex(pargraph.tensor(SINGULAR))
    assert inverse.info.tolist() == torch.linalg.inv_ex(torch.tensor(SINGULAR)).info.tolist()
    np.testing.assert_array_equal(inverse.inverse.numpy()[0],
                                  torch.linalg.inv_ex(torch.tensor(SINGULAR)).inverse[0].numpy())
    for call, needle in (
            (lambda t: t.linalg.cholesky_ex(t.tensor(NOT_PD), check_errors=True).L,
             "The factorization could not be completed because the input is not "
             "positive-definite (the leading minor of order 2 is not positive-definite)"),
            (lambda t: t.linalg.inv_ex(t.tensor(SINGULAR), check_errors=True).inverse,
             "The diagonal element 2 is zero, the inversion could not be completed because "
             "the input matrix is singular")):
        with pytest.raises(RuntimeError, match=re.escape(needle)):
            call(torch)
        with pytest.raises(pargraph.linalg.LinAlgError, match=re.escape(needle)):
            call(pargraph).numpy()


@pytest.mark.parametrize("array", [A, M, M.T, RNG.standard_normal((2, 4, 4))])
def test_lu_factor_lu_and_lu_solve_as_pytorchs(array):
    square = array.shape[-1] == array.shape[-2]
    both(lambda t, a: t.linalg.lu_factor(a), array, grad=square)
    both(lambda t, a: t.linalg.lu(a), array, grad=square)
    both(lambda t, a: t.lu_unpack(*t.linalg.lu_factor(a)), array, grad=square)
    both(lambda t, a: t.linalg.lu_factor_ex(a), array, grad=square)
    if square:
        right = RNG.standard_normal(array.shape[:-1] + (2,))
        for left in (True, False):
            for adjoint in (False, True):
                rhs = right if left else right.swapaxes(-1, -2)
                both(lambda t, a, b: t.linalg.lu_solve(*t.linalg.lu_factor(a), b, left=left,
                                                       adjoint=adjoint), array, rhs)
    else:
        with pytest.raises(NotImplementedError, match="square matrices only"):
            pargraph.linalg.lu(pargraph.tensor(array, requires_grad=True)).L.sum().backward()


def test_lu_of_a_singular_matrix_says_where_its_zero_pivot_is():
    ours = pargraph.linalg.lu_factor_ex(pargraph.tensor(SINGULAR))
    theirs = torch.linalg.lu_factor_ex(torch.tensor(SINGULAR))
    assert ours.info.tolist() == theirs.info.tolist() == [2, 0]
    np.testing.assert_allclose(ours.LU.numpy(), theirs.LU.numpy())
    assert ours.pivots.tolist() == theirs.pivots.tolist()
    with pytest.raises(pargraph.linalg.LinAlgError, match=r"U\[2,2\] is zero"):
        pargraph.linalg.lu_factor_ex(pargraph.tensor(SINGULAR), check_errors=True)
