"""``pargraph.nn.utils.parametrizations``: weight normalization and spectral normalization
as parametrizations (:mod:`pargraph.nn.utils.parametrize`), PyTorch's current form of both."""

from __future__ import annotations

from typing import Any

import numpy as np

from pargraph._tensor import Tensor
from pargraph.autograd.mode import no_grad
from pargraph.nn.functional.normalization import normalize
from pargraph.nn.module import Module
from pargraph.nn.utils import parametrize
from pargraph.nn.utils.norms import (
    _keep,
    _norm_except_dim,
    _output_dim,
    _positive_iterations,
    _spectral_matrix,
)


class _WeightNorm(Module):
    """``weight = g * v / |v|`` from ``original0`` (the magnitude ``g``) and ``original1``
    (the direction ``v``), the norm over every dimension but ``dim`` (-1: over all)."""

    def __init__(self, dim: int | None = 0) -> None:
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return weight_v * (weight_g / _norm_except_dim(weight_v, self._dim(weight_v)))

    def right_inverse(self, weight: Tensor) -> tuple[Tensor, Tensor]:
        return _norm_except_dim(weight, self._dim(weight)), weight

    def _dim(self, weight: Tensor) -> int:
        return -1 if self.dim == -1 else self.dim % weight.dim()


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Split ``module``'s ``name`` into a magnitude and a direction (``weight = g * v /
    |v|``, the norm over every dimension but ``dim``; ``None``: over all), as
    ``torch.nn.utils.parametrizations.weight_norm``: ``parametrizations.<name>.original0``
    is ``g``, ``original1`` is ``v``. A ``state_dict`` saved with the older
    ``nn.utils.weight_norm`` (``<name>_g``, ``<name>_v``) loads into it. Returns ``module``.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.nn.utils.parametrizations import weight_norm
    >>> layer = weight_norm(pargraph.nn.Linear(3, 2))
    >>> [tuple(p.shape) for p in layer.parametrizations.weight.parameters()]
    [(2, 1), (2, 3)]
    """
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)

    def older_keys(state_dict: dict, prefix: str, *_: Any) -> None:
        g, v = f"{prefix}{name}_g", f"{prefix}{name}_v"
        if g in state_dict and v in state_dict:
            state_dict[f"{prefix}parametrizations.{name}.original0"] = state_dict.pop(g)
            state_dict[f"{prefix}parametrizations.{name}.original1"] = state_dict.pop(v)

    module._register_load_state_dict_pre_hook(older_keys)
    return module


class _SpectralNorm(Module):
    """The weight over its largest singular value, estimated by power iteration: ``_u`` and
    ``_v`` (buffers) move one or more steps at each forward in training mode."""

    def __init__(self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0,
                 eps: float = 1e-12) -> None:
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [-{ndim}, "
                             f"{ndim - 1}] but got {dim})")
        n_power_iterations = _positive_iterations(n_power_iterations)
        self.dim = dim % ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            matrix = _spectral_matrix(weight, self.dim)
            rows, columns = matrix.shape
            with no_grad():
                self.register_buffer("_u", normalize(matrix.new_empty(rows).normal_(0, 1),
                                                     dim=0, eps=eps))
                self.register_buffer("_v", normalize(matrix.new_empty(columns).normal_(0, 1),
                                                     dim=0, eps=eps))
            self._power_method(matrix, 15)

    def _power_method(self, matrix: Tensor, iterations: int) -> None:
        """Move ``_u`` and ``_v`` ``iterations`` steps towards the top singular vectors; the
        buffers change as batch norm's statistics do (training state, kept all old or all
        new)."""
        with no_grad():
            u, v = self._u, self._v
            for _ in range(iterations):
                u = normalize(matrix.mv(v), dim=0, eps=self.eps)
                v = normalize(matrix.T.mv(u), dim=0, eps=self.eps)
            _keep(self._u, u)
            _keep(self._v, v)

    def forward(self, weight: Tensor) -> Tensor:
        if weight.ndim == 1:
            return normalize(weight, dim=0, eps=self.eps)
        matrix = _spectral_matrix(weight, self.dim)
        if self.training:
            self._power_method(matrix, self.n_power_iterations)
        # Copies, as PyTorch's: a second call in training mode replaces the buffers' values,
        # which this call's backward still reads.
        return weight / self._u.clone().vdot(matrix.mv(self._v.clone()))

    def right_inverse(self, value: Tensor) -> Tensor:
        return value


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1,
                  eps: float = 1e-12, dim: int | None = None) -> Module:
    """Divide ``module``'s ``name`` by its spectral norm (largest singular value), estimated
    by ``n_power_iterations`` power-iteration steps per forward in training mode, as
    ``torch.nn.utils.parametrizations.spectral_norm`` (``dim``: the output dimension, by
    default 1 for transposed convolutions, else 0). Returns ``module``.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.nn.utils.parametrizations import spectral_norm
    >>> layer = spectral_norm(pargraph.nn.Linear(4, 3))
    >>> sorted(layer.state_dict())[:2]
    ['bias', 'parametrizations.weight.0._u']
    """
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    dim = _output_dim(module) if dim is None else dim
    parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module


_ORTHOGONAL_MAPS = ("matrix_exp", "cayley", "householder")


class _Orthogonal(Module):
    """An orthogonal matrix (or batch) from an unconstrained one, PyTorch's way: the
    exponential or the Cayley map of the skew-symmetric matrix its lower triangle makes, or a
    product of Householder reflections; with ``use_trivialization`` the result multiplies a
    fixed orthogonal ``base`` (set by assignment), so training starts at ``base``."""

    def __init__(self, weight: Tensor, orthogonal_map: str, *,
                 use_trivialization: bool = True) -> None:
        super().__init__()
        self.shape = tuple(weight.shape)
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X: Tensor) -> Tensor:
        from pargraph import factories, functions, linalg

        n, k = X.shape[-2:]
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        if self.orthogonal_map in ("matrix_exp", "cayley"):
            X = X.tril()
            if n != k:  # embedded in a square matrix
                X = functions.cat([X, X.new_zeros((n, n - k)).expand(*X.shape[:-2], -1, -1)],
                                  dim=-1)
            A = X - X.mH
            if self.orthogonal_map == "matrix_exp":
                Q = linalg.matrix_exp(A)
            else:  # (I + A/2)(I - A/2)^-1
                eye = factories.eye(n, dtype=A.dtype)
                Q = linalg.solve(eye - A * 0.5, eye + A * 0.5)
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(-1)
            tau = 2.0 / (1.0 + (A * A).sum(dim=-2))
            Q = linalg.householder_product(A, tau)
            # The signs on X's diagonal, not differentiated through
            Q = Q * X.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)
        if getattr(self, "base", None) is not None:
            Q = self.base @ Q
        return Q.mT if transposed else Q

    def right_inverse(self, Q: Tensor) -> Tensor:
        from pargraph import factories, functions

        if tuple(Q.shape) != self.shape:
            raise ValueError(f"Expected a matrix or batch of matrices of shape "
                             f"{list(self.shape)}. Got a tensor of shape {list(Q.shape)}.")
        with no_grad():
            initial = Q
            n, k = Q.shape[-2:]
            transposed = n < k
            if transposed:
                Q = Q.mT
                n, k = k, n
            if "base" not in self._buffers:
                if self.orthogonal_map != "householder":
                    raise NotImplementedError("It is not possible to assign to the matrix "
                                              "exponential or the Cayley parametrizations when "
                                              "use_trivialization=False.")
                # X = QR with diag(R) > 0: the diagonal keeps the signs only, flipped where
                # LAPACK used no reflection (tau = 0)
                a, tau = Q.geqrf()
                signs = a.diagonal(dim1=-2, dim2=-1).sign()
                a = _with_diagonal(a, signs.where(tau != 0.0, -signs))
                return a.mT if transposed else a
            if n == k:
                Q = Q.clone() if _is_orthogonal(Q) else _make_orthogonal(Q)
            else:  # completed into a square orthogonal matrix
                extra = factories.randn(*Q.shape[:-2], n, n - k, dtype=Q.dtype)
                Q = _make_orthogonal(functions.cat([Q, extra], dim=-1))
            self.base = Q
            # -I: the Householder map of it is I (its diagonal gives the signs)
            zeros = factories.zeros_like(initial)
            return _with_diagonal(zeros, -zeros.diagonal(dim1=-2, dim2=-1).new_ones(()).expand(
                zeros.diagonal(dim1=-2, dim2=-1).shape))


def _with_diagonal(x: Tensor, diagonal: Tensor) -> Tensor:
    """``x`` with its main diagonal (of the last two dimensions) replaced by ``diagonal``."""
    from pargraph import factories, functions

    m, n = x.shape[-2:]
    eye = factories.eye(m, n, dtype=x.dtype)
    if diagonal.shape[-1] < n:
        diagonal = functions.cat([diagonal, diagonal.new_zeros(
            diagonal.shape[:-1] + (n - diagonal.shape[-1],))], dim=-1)
    return x * (1 - eye) + diagonal.unsqueeze(-2) * eye


def _is_orthogonal(Q: Tensor) -> bool:
    n, k = Q.shape[-2:]
    eps = 10.0 * n * float(np.finfo(Q.dtype).eps)
    from pargraph import factories, functions

    return bool(functions.allclose(Q.mH @ Q, factories.eye(k, dtype=Q.dtype), atol=eps))


def _make_orthogonal(A: Tensor) -> Tensor:
    """The Q of a tall matrix's QR factorization, with ``R``'s diagonal made nonnegative."""
    from pargraph import linalg

    a, tau = A.geqrf()
    Q = linalg.householder_product(a, tau)
    return Q * a.diagonal(dim1=-2, dim2=-1).sgn().unsqueeze(-2)


def orthogonal(module: Module, name: str = "weight", orthogonal_map: str | None = None, *,
               use_trivialization: bool = True) -> Module:
    """Keep ``module``'s ``name`` an orthogonal matrix (or batch of them), as
    ``torch.nn.utils.parametrizations.orthogonal``: ``orthogonal_map`` is ``"matrix_exp"``,
    ``"cayley"`` or ``"householder"`` (by default the first for square matrices, else the
    last). Returns ``module``.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.nn.utils.parametrizations import orthogonal
    >>> layer = orthogonal(pargraph.nn.Linear(3, 3))
    >>> w = layer.weight
    >>> bool(pargraph.allclose(w @ w.T, pargraph.eye(3), atol=1e-5))
    True
    """
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of "
                         f"{weight.ndim} dimensions.")
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.shape[-2] == weight.shape[-1] else "householder"
    if orthogonal_map not in _ORTHOGONAL_MAPS:
        raise ValueError('orthogonal_map has to be one of "matrix_exp", "cayley", '
                         f'"householder". Got: {orthogonal_map}')
    parametrize.register_parametrization(
        module, name, _Orthogonal(weight, orthogonal_map,
                                  use_trivialization=use_trivialization), unsafe=True)
    return module
