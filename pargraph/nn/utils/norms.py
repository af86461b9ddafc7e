"""Weight and spectral normalization in PyTorch's older form: forward pre-hooks that make a
weight again from ``name_g``/``name_v`` (its direction and norm) or ``name_orig`` divided by
its largest singular value, as ``torch.nn.utils.weight_norm`` and ``spectral_norm``; the norms
and power-iteration steps ``parametrizations`` (the current form) shares."""

from __future__ import annotations

import warnings
from typing import Any

from pargraph._tensor import Tensor
from pargraph.autograd.mode import no_grad
from pargraph.engine import execution
from pargraph.nn.functional.normalization import normalize
from pargraph.nn.module import Parameter
from pargraph.nn.modules.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d


def _norm_except_dim(v: Tensor, dim: int) -> Tensor:
    """The 2-norm of ``v`` over every dimension but ``dim`` (all of them for -1), shaped to
    broadcast against ``v``, as PyTorch's ``norm_except_dim``."""
    if dim == -1:
        return v.norm()
    moved = v.movedim(dim, 0) if dim else v
    norms = moved.reshape(moved.shape[0], -1).norm(2, 1)
    shape = [1] * v.dim()
    shape[dim] = v.shape[dim]
    return norms.reshape(shape)


class _WeightNorm:
    """The forward pre-hook :func:`weight_norm` registers: the weight made again from its
    direction ``v`` and magnitude ``g`` before each forward."""

    def __init__(self, name: str, dim: int) -> None:
        self.name, self.dim = name, dim

    def compute_weight(self, module: Any) -> Tensor:
        g, v = getattr(module, f"{self.name}_g"), getattr(module, f"{self.name}_v")
        return v * (g / _norm_except_dim(v, self.dim))

    def __call__(self, module: Any, inputs: Any) -> None:
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module: Any, name: str = "weight", dim: int | None = 0) -> Any:
    """Split ``module``'s parameter ``name`` into a magnitude ``name_g`` and a direction
    ``name_v`` (``weight = g * v / |v|``, the norm over every dimension but ``dim``; ``None``:
    over all), made again before each forward, as ``torch.nn.utils.weight_norm`` (with its
    deprecation warning). Returns ``module``.

    Examples
    --------
    >>> import warnings, pargraph
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     layer = pargraph.nn.utils.weight_norm(pargraph.nn.Linear(3, 2))
    >>> sorted(name for name, _ in layer.named_parameters())
    ['bias', 'weight_g', 'weight_v']
    """
    warnings.warn("`torch.nn.utils.weight_norm` is deprecated in favor of "
                  "`torch.nn.utils.parametrizations.weight_norm`.", FutureWarning, stacklevel=2)
    if _hook_of(module, _WeightNorm, name) is not None:
        raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter "
                           f"{name}")
    weight = getattr(module, name)
    dim = -1 if dim is None or dim == -1 else dim % weight.dim()  # -1: over every dimension
    hook = _WeightNorm(name, dim)
    with no_grad():
        magnitude, direction = _norm_except_dim(weight, dim).clone(), weight.clone()
    delattr(module, name)
    module.register_parameter(f"{name}_g", Parameter(magnitude))
    module.register_parameter(f"{name}_v", Parameter(direction))
    setattr(module, name, hook.compute_weight(module))
    module.register_forward_pre_hook(hook)
    return module


def remove_weight_norm(module: Any, name: str = "weight") -> Any:
    """Undo :func:`weight_norm`: ``name`` a parameter again, holding the current weight.

    Examples
    --------
    >>> import warnings, pargraph
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     layer = pargraph.nn.utils.weight_norm(pargraph.nn.Linear(3, 2))
    >>> sorted(n for n, _ in pargraph.nn.utils.remove_weight_norm(layer).named_parameters())
    ['bias', 'weight']
    """
    hook = _hook_of(module, _WeightNorm, name)
    if hook is None:
        raise ValueError(f"weight_norm of '{name}' not found in {module}")
    with no_grad():
        weight = hook.compute_weight(module).clone()
    module._forward_pre_hooks.remove(hook)
    delattr(module, f"{name}_g")
    delattr(module, f"{name}_v")
    delattr(module, name)  # the weight the hook set, a plain attribute
    module.register_parameter(name, Parameter(weight))
    return module


def _hook_of(module: Any, kind: type, name: str) -> Any:
    """The forward pre-hook of ``kind`` registered on ``module`` for ``name``, or None."""
    for hook in module._forward_pre_hooks:
        if isinstance(hook, kind) and hook.name == name:
            return hook
    return None


def _spectral_matrix(weight: Tensor, dim: int) -> Tensor:
    """``weight`` with ``dim`` first, flattened to a matrix: what spectral normalization
    takes the largest singular value of."""
    if dim:
        weight = weight.permute(dim, *(d for d in range(weight.dim()) if d != dim))
    return weight.reshape(weight.shape[0], -1)


def _keep(buffer: Tensor, value: Tensor) -> None:
    """``buffer`` holds ``value`` from now on, as training state: kept with the step's other
    state, all old or all new, as batch norm's running statistics are."""
    replaced = buffer._node
    buffer._rebind(value._node)
    execution.defer([buffer._node], state=True, replaces=[replaced])


def _positive_iterations(n_power_iterations: int) -> int:
    if n_power_iterations <= 0:
        raise ValueError("Expected n_power_iterations to be positive, but got "
                         f"n_power_iterations={n_power_iterations}")
    return n_power_iterations


def _output_dim(module: Any) -> int:
    """The dimension of a weight that holds a layer's outputs: 1 for transposed
    convolutions, else 0."""
    return 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0


class _SpectralNorm:
    """The forward pre-hook :func:`spectral_norm` registers: ``name_orig`` divided by its
    largest singular value, estimated by power iteration from ``name_u`` and ``name_v``, which
    move ``n_power_iterations`` steps at each forward in training mode."""

    def __init__(self, name: str, n_power_iterations: int, dim: int, eps: float) -> None:
        self.name, self.dim, self.eps = name, dim, eps
        self.n_power_iterations = _positive_iterations(n_power_iterations)

    def compute_weight(self, module: Any, do_power_iteration: bool) -> Tensor:
        weight = getattr(module, f"{self.name}_orig")
        u, v = getattr(module, f"{self.name}_u"), getattr(module, f"{self.name}_v")
        matrix = _spectral_matrix(weight, self.dim)
        if do_power_iteration:
            with no_grad():
                for _ in range(self.n_power_iterations):
                    v = normalize(matrix.T.mv(u), dim=0, eps=self.eps)
                    u = normalize(matrix.mv(v), dim=0, eps=self.eps)
                _keep(getattr(module, f"{self.name}_u"), u)
                _keep(getattr(module, f"{self.name}_v"), v)
                # Copies, as PyTorch's: the next call's steps replace the buffers' values,
                # which this call's backward still reads.
                u, v = u.clone(), v.clone()
        return weight / u.dot(matrix.mv(v))

    def __call__(self, module: Any, inputs: Any) -> None:
        setattr(module, self.name, self.compute_weight(module, module.training))


def spectral_norm(module: Any, name: str = "weight", n_power_iterations: int = 1,
                  eps: float = 1e-12, dim: int | None = None) -> Any:
    """Divide ``module``'s parameter ``name`` by its largest singular value before each
    forward, estimated by power iteration (``name_u``, ``name_v`` buffers; ``name_orig`` the
    parameter), as ``torch.nn.utils.spectral_norm``. ``dim``: the output dimension, by default
    1 for transposed convolutions, else 0. Returns ``module``.

    Examples
    --------
    >>> import pargraph
    >>> layer = pargraph.nn.utils.spectral_norm(pargraph.nn.Linear(3, 2))
    >>> list(layer.state_dict())
    ['bias', 'weight_orig', 'weight_u', 'weight_v']
    """
    if _hook_of(module, _SpectralNorm, name) is not None:
        raise RuntimeError(f"Cannot register two spectral_norm hooks on the same parameter "
                           f"{name}")
    dim = _output_dim(module) if dim is None else dim
    hook = _SpectralNorm(name, n_power_iterations, dim, eps)
    weight = module._parameters[name]
    if weight is None:
        raise ValueError(f"`SpectralNorm` cannot be applied as parameter `{name}` is None")
    with no_grad():
        rows, columns = _spectral_matrix(weight, dim).shape
        u = normalize(weight.new_empty(rows).normal_(0, 1), dim=0, eps=eps)
        v = normalize(weight.new_empty(columns).normal_(0, 1), dim=0, eps=eps)
    delattr(module, name)
    module.register_parameter(f"{name}_orig", weight)
    setattr(module, name, weight.detach())
    module.register_buffer(f"{name}_u", u)
    module.register_buffer(f"{name}_v", v)
    module.register_forward_pre_hook(hook)
    return module


def remove_spectral_norm(module: Any, name: str = "weight") -> Any:
    """Undo :func:`spectral_norm`: ``name`` a parameter again, holding the normalized weight.

    Examples
    --------
    >>> import pargraph
    >>> layer = pargraph.nn.utils.spectral_norm(pargraph.nn.Linear(3, 2))
    >>> list(pargraph.nn.utils.remove_spectral_norm(layer).state_dict())
    ['bias', 'weight']
    """
    hook = _hook_of(module, _SpectralNorm, name)
    if hook is None:
        raise ValueError(f"spectral_norm of '{name}' not found in {module}")
    with no_grad():
        weight = hook.compute_weight(module, do_power_iteration=False)
    module._forward_pre_hooks.remove(hook)
    for attribute in (name, f"{name}_u", f"{name}_v", f"{name}_orig"):
        delattr(module, attribute)
    module.register_parameter(name, Parameter(weight.detach()))
    return module
