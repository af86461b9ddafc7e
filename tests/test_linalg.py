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
