"""``pargraph.nn.utils``: gradient clipping, recorded into the step's graph (nothing is
computed early: the clipped gradients run with the optimizer's step, in the same dask run);
parameters as one vector and back; weight and spectral normalization (PyTorch's older hook
form; ``parametrizations``: the current one); ``prune``: masks on parameters; ``rnn``:
padded and packed batches of sequences."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from pargraph import execution
from pargraph._tensor import Tensor
from pargraph.autograd.mode import no_grad
from pargraph.factories import tensor
from pargraph.functions import cat, stack


def _grads(parameters: Tensor | Iterable[Tensor]) -> list[Tensor]:
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    return [p.grad for p in params if p.grad is not None]


def clip_grad_norm_(parameters: Tensor | Iterable[Tensor], max_norm: float,
                    norm_type: float = 2.0, error_if_nonfinite: bool = False,
                    foreach: bool | None = None) -> Tensor:
    """Scale the gradients so that their joint ``norm_type``-norm is at most ``max_norm``;
    returns that norm (before clipping), as PyTorch does. ``error_if_nonfinite`` has to look
    at the norm, so it computes it now.

    Examples
    --------
    >>> import pargraph
    >>> w = pargraph.ones(4, requires_grad=True)
    >>> (w * 3).sum().backward()
    >>> pargraph.nn.utils.clip_grad_norm_([w], max_norm=1.0)
    tensor(6.)
    >>> round(w.grad.norm().item(), 4)
    1.0
    """
    grads = _grads(parameters)
    if not grads:
        return tensor(0.0)
    total = get_total_norm(grads, norm_type, error_if_nonfinite)
    clip_grads_with_norm_(grads, max_norm, total, _gradients=True)
    return total


def get_total_norm(tensors: Tensor | Iterable[Tensor], norm_type: float = 2.0,
                   error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """The ``norm_type``-norm of ``tensors`` taken together (of the norms of each), as
    ``clip_grad_norm_`` computes it; ``error_if_nonfinite`` has to look at it, so it computes
    it now.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.utils.get_total_norm([pargraph.tensor([3.0]), pargraph.tensor([4.0])])
    tensor(5.)
    """
    tensors = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    if not tensors:
        return tensor(0.0)
    norm_type = float(norm_type)
    with no_grad():
        if norm_type == math.inf:
            total = stack([t.abs().amax() for t in tensors]).amax()
        else:
            total = stack([t.norm(norm_type) for t in tensors]).norm(norm_type)
    if error_if_nonfinite and not math.isfinite(total.item()):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from "
                           "`parameters` is non-finite, so it cannot be clipped. To disable "
                           "this error and scale the gradients by the non-finite norm "
                           "anyway, set `error_if_nonfinite=False`")
    return total


def clip_grads_with_norm_(parameters: Tensor | Iterable[Tensor], max_norm: float,
                          total_norm: Tensor | float, foreach: bool | None = None,
                          *, _gradients: bool = False) -> None:
    """Scale the parameters' gradients by ``max_norm / total_norm`` where that is below 1 (the
    second half of ``clip_grad_norm_``, with a norm from :func:`get_total_norm`).

    Examples
    --------
    >>> import pargraph
    >>> w = pargraph.ones(4, requires_grad=True)
    >>> (w * 3).sum().backward()
    >>> norm = pargraph.nn.utils.get_total_norm([w.grad])
    >>> pargraph.nn.utils.clip_grads_with_norm_([w], 1.0, norm); round(w.grad.norm().item(), 4)
    1.0
    """
    grads = list(parameters) if _gradients else _grads(parameters)
    if not grads:
        return
    with no_grad():
        total = total_norm if isinstance(total_norm, Tensor) else tensor(float(total_norm))
        scale = (max_norm / (total + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(scale)


def clip_grad_value_(parameters: Tensor | Iterable[Tensor], clip_value: float,
                     foreach: bool | None = None) -> None:
    """Clamp every gradient element to ``[-clip_value, clip_value]``.

    Examples
    --------
    >>> import pargraph
    >>> w = pargraph.ones(2, requires_grad=True)
    >>> (w * 3).sum().backward(); pargraph.nn.utils.clip_grad_value_([w], 0.5); w.grad
    tensor([0.5000, 0.5000])
    """
    with no_grad():
        for g in _grads(parameters):
            g.clamp_(-clip_value, clip_value)


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """The parameters flattened and concatenated into one vector, as PyTorch's (recorded:
    gradients flow back through it).

    Examples
    --------
    >>> import pargraph
    >>> layer = pargraph.nn.Linear(3, 2)
    >>> pargraph.nn.utils.parameters_to_vector(layer.parameters()).shape
    pargraph.Size([8])
    """
    return cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Give each parameter, in turn, the next slice of ``vec`` as its data, as PyTorch's (the
    parameters keep no history of ``vec``).

    Examples
    --------
    >>> import pargraph
    >>> layer = pargraph.nn.Linear(3, 2)
    >>> pargraph.nn.utils.vector_to_parameters(pargraph.zeros(8), layer.parameters())
    >>> layer.bias
    Parameter containing:
    tensor([0., 0.], requires_grad=True)
    """
    if not isinstance(vec, Tensor):
        kind = type(vec)
        name = kind.__qualname__ if kind.__module__ == "builtins" else \
            f"{kind.__module__}.{kind.__qualname__}"
        raise TypeError(f"expected torch.Tensor, but got: {name}")
    start = 0
    for param in parameters:
        count = param.numel()
        param.data = vec[start:start + count].view_as(param).data
        start += count


from pargraph.nn.utils import rnn as rnn  # noqa: E402  (PyTorch's nn.utils.rnn)


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
    import warnings

    from pargraph.nn.module import Parameter

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
    from pargraph.nn.module import Parameter

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
    from pargraph.nn.modules.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d

    return 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0


class _SpectralNorm:
    """The forward pre-hook :func:`spectral_norm` registers: ``name_orig`` divided by its
    largest singular value, estimated by power iteration from ``name_u`` and ``name_v``, which
    move ``n_power_iterations`` steps at each forward in training mode."""

    def __init__(self, name: str, n_power_iterations: int, dim: int, eps: float) -> None:
        self.name, self.dim, self.eps = name, dim, eps
        self.n_power_iterations = _positive_iterations(n_power_iterations)

    def compute_weight(self, module: Any, do_power_iteration: bool) -> Tensor:
        from pargraph.nn.functional.normalization import normalize

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
    from pargraph.nn.functional.normalization import normalize

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
    from pargraph.nn.module import Parameter

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


# PyTorch's nn.utils.parametrize and nn.utils.parametrizations (they use _norm_except_dim).
from pargraph.nn.utils import parametrizations as parametrizations  # noqa: E402
from pargraph.nn.utils import parametrize as parametrize  # noqa: E402
from pargraph.nn.utils import prune as prune  # noqa: E402
