"""``pargraph.utils.checkpoint``: activation checkpointing, as ``torch.utils.checkpoint``.

A checkpointed function's values are not kept for the backward: the backward computes them
again from the function's inputs (``pargraph.autograd.recompute``), trading compute for the
memory a deep model's activations take. Results and gradients equal the plain call's. Random
draws inside it (dropout) are kept, not drawn again, so the recomputation sees the same
numbers (PyTorch's ``preserve_rng_state``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from pargraph._tensor import Tensor
from pargraph.autograd.mode import no_grad
from pargraph.autograd.recompute import recomputed
from pargraph.graph import toposort, uid_mark
from pargraph.pytree import flatten

__all__ = ["checkpoint", "checkpoint_sequential"]

_EXPLICIT = ("the use_reentrant parameter should be passed explicitly. use_reentrant=False is "
             "recommended; pargraph computes the same either way, except that with "
             "use_reentrant=True, as in PyTorch, nothing requires grad unless an input does.")


def checkpoint(function: Callable, *args: Any, use_reentrant: bool | None = None,
               context_fn: Callable | None = None, determinism_check: str = "default",
               debug: bool = False, preserve_rng_state: bool = True, **kwargs: Any) -> Any:
    """``function(*args, **kwargs)``, whose values the backward computes again instead of
    keeping them (see the module's docstring). ``context_fn``, ``determinism_check`` and
    ``debug`` are accepted for PyTorch programs and change nothing here; random draws are
    always kept.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.utils.checkpoint import checkpoint
    >>> layer = pargraph.nn.Linear(3, 3)
    >>> x = pargraph.ones(2, 3, requires_grad=True)
    >>> checkpoint(layer, x, use_reentrant=False).sum().backward()
    >>> x.grad.shape
    pargraph.Size([2, 3])
    """
    if use_reentrant is None:
        warnings.warn(f"pargraph.utils.checkpoint: {_EXPLICIT}", stacklevel=2)
        use_reentrant = True
    tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, Tensor)]
    if use_reentrant and not any(t.requires_grad for t in tensors):
        warnings.warn("None of the inputs have requires_grad=True. Gradients will be None",
                      stacklevel=2)
        with no_grad():
            return function(*args, **kwargs)
    begun = uid_mark()
    result = function(*args, **kwargs)
    outputs = [v._node for v in flatten(result)[0] if isinstance(v, Tensor)]
    recomputed.mark([node for node in toposort(outputs, stop=lambda n: n.uid < begun)
                     if node.uid > begun and node.inputs and node.history])
    return result


def checkpoint_sequential(functions: Any, segments: int, input: Tensor,
                          use_reentrant: bool | None = None, **kwargs: Any) -> Tensor:
    """Run ``functions`` (a ``Sequential`` or a list of modules) on ``input`` in ``segments``
    parts, each but the last checkpointed, as PyTorch's.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.utils.checkpoint import checkpoint_sequential
    >>> model = pargraph.nn.Sequential(pargraph.nn.Linear(2, 2), pargraph.nn.ReLU(),
    ...                                pargraph.nn.Linear(2, 1))
    >>> checkpoint_sequential(model, 2, pargraph.ones(4, 2), use_reentrant=False).shape
    pargraph.Size([4, 1])
    """
    if use_reentrant is None:
        warnings.warn(f"pargraph.utils.checkpoint.checkpoint_sequential: {_EXPLICIT}",
                      stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))

    def run(start: int, end: int) -> Callable:
        def forward(value: Any) -> Any:
            for j in range(start, end + 1):
                value = functions[j](value)
            return value
        return forward

    if hasattr(functions, "children") and not isinstance(functions, (list, tuple)):
        functions = list(functions.children())
    size = len(functions) // segments
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant,
                           preserve_rng_state=preserve)
    return run(end + 1, len(functions) - 1)(input)
