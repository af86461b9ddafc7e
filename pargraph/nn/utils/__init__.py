"""``pargraph.nn.utils``: gradient clipping, recorded into the step's graph (nothing is
computed early: the clipped gradients run with the optimizer's step, in the same dask run);
parameters as one vector and back; weight and spectral normalization (PyTorch's older hook
form; ``parametrizations``: the current one); ``prune``: masks on parameters; ``rnn``:
padded and packed batches of sequences."""

from __future__ import annotations

import math
from collections.abc import Iterable

from pargraph._tensor import Tensor
from pargraph.autograd.mode import no_grad
from pargraph.factories import tensor
from pargraph.functions import cat, stack
from pargraph.nn.utils.norms import remove_spectral_norm as remove_spectral_norm
from pargraph.nn.utils.norms import remove_weight_norm as remove_weight_norm
from pargraph.nn.utils.norms import spectral_norm as spectral_norm
from pargraph.nn.utils.norms import weight_norm as weight_norm


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


# PyTorch's nn.utils.parametrize and nn.utils.parametrizations.
from pargraph.nn.utils import parametrizations as parametrizations  # noqa: E402
from pargraph.nn.utils import parametrize as parametrize  # noqa: E402
from pargraph.nn.utils import prune as prune  # noqa: E402
from pargraph.nn.utils import rnn as rnn  # noqa: E402  (PyTorch's nn.utils.rnn)
