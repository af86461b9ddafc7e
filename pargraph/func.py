"""``pargraph.func``: PyTorch's function transforms (``torch.func``) over pargraph's autograd.

``grad``, ``grad_and_value``, ``vjp``, ``jacrev``, ``jacfwd`` and ``hessian`` record the
backward graph of the function as ordinary nodes (``create_graph``), so they nest and compose;
``vmap`` calls the function once per element of the mapped dimension and stacks the results:
each element's ops are an independent branch of the graph, which pargraph runs side by side.
``functional_call`` runs a module with other tensors in place of its parameters and buffers.
Arguments and results may be tensors or nested tuples, lists and dicts of them.

Differences from PyTorch: ``jacfwd`` computes by reverse mode (the same values), and random
ops inside ``vmap`` draw per element (``randomness="different"``; ``"same"`` draws the same
numbers for every element; the default ``"error"`` raises as PyTorch's does).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pargraph import autograd
from pargraph._tensor import Tensor
from pargraph.autograd.mode import enable_grad
from pargraph.factories import get_rng_state, set_rng_state, tensor, zeros_like
from pargraph.functions import stack
from pargraph.pytree import flatten, unflatten

__all__ = ["functional_call", "grad", "grad_and_value", "hessian", "jacfwd", "jacrev", "vjp",
           "vmap"]


def _entered(t: Any) -> Any:
    """A tensor the transform differentiates with respect to: a new leaf for one that needs
    no gradient outside, else a view of it (so an enclosing transform still sees the path)."""
    if not isinstance(t, Tensor):
        return t
    return t.view(t.shape) if t.requires_grad else t.detach().requires_grad_()


def _numbers(argnums: int | Sequence[int], count: int) -> tuple[int, ...]:
    numbers = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for k in numbers:
        if not -count <= k < count:
            raise RuntimeError(f"Got argnums={argnums} but only {count} positional inputs")
    return tuple(k % count for k in numbers)


def _enter_arguments(args: tuple, argnums: int | Sequence[int]) -> tuple:
    """``args`` with the ``argnums`` ones entered; per entered argument its nesting and its
    tensors, and whether any of the originals needs a gradient outside."""
    args = list(args)
    entered, outer = [], False
    for k in _numbers(argnums, len(args)):
        leaves, spec = flatten(args[k])
        outer |= any(isinstance(t, Tensor) and t.requires_grad for t in leaves)
        new = [_entered(t) for t in leaves]
        args[k] = unflatten(spec, iter(new))
        entered.append((spec, new))
    return tuple(args), entered, outer


def _gradients(outputs: list, entered: list, cotangents: list | None, outer: bool) -> list:
    """The gradients of ``outputs`` with respect to each entered argument, in its nesting
    (zeros where an input does not reach them); detached when nothing outside needs them."""
    inputs = [t for _, leaves in entered for t in leaves if isinstance(t, Tensor)]
    found = iter(autograd.grad(outputs, inputs, grad_outputs=cotangents, retain_graph=True,
                               create_graph=True, allow_unused=True))
    result = []
    for spec, leaves in entered:
        grads = []
        for t in leaves:
            if not isinstance(t, Tensor):
                grads.append(None)
                continue
            g = next(found)
            g = zeros_like(t) if g is None else g
            grads.append(g if outer else g.detach())
        result.append(unflatten(spec, iter(grads)))
    return result


def grad_and_value(func: Callable, argnums: int | Sequence[int] = 0,
                   has_aux: bool = False) -> Callable:
    """``func`` made to return ``(gradient, value)``: the gradient of its scalar result with
    respect to the arguments ``argnums`` (each a tensor or a nest of them), as
    ``torch.func.grad_and_value``; with ``has_aux``, ``func`` returns ``(value, aux)`` and the
    transform ``(gradient, (value, aux))``.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.func import grad_and_value
    >>> g, value = grad_and_value(lambda x: (x ** 2).sum())(pargraph.tensor([1.0, 2.0]))
    >>> g.tolist(), value.item()
    ([2.0, 4.0], 5.0)
    """
    def transformed(*args: Any, **kwargs: Any) -> Any:
        args, entered, outer = _enter_arguments(args, argnums)
        with enable_grad():
            out = func(*args, **kwargs)
        if has_aux:
            if not (isinstance(out, tuple) and len(out) == 2):
                raise RuntimeError("grad_and_value(f)(*args): output of function f should be "
                                   "a tuple: (output, aux) if has_aux is True")
            value, aux = out
        else:
            value, aux = out, None
        if not isinstance(value, Tensor):
            raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a "
                               f"Tensor, got {type(value)}")
        if value.dim() != 0:
            raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a "
                               f"scalar Tensor, got tensor with {value.dim()} dims. Maybe you "
                               "wanted to use the vjp or jacrev APIs instead?")
        grads = _gradients([value], entered, None, outer)
        grads = grads[0] if isinstance(argnums, int) else tuple(grads)
        value = value if outer else value.detach()
        return (grads, (value, aux)) if has_aux else (grads, value)

    return transformed


def grad(func: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Callable:
    """``func`` made to return the gradient of its scalar result with respect to the
    arguments ``argnums``, as ``torch.func.grad``; it nests (``grad(grad(f))``).

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.func import grad
    >>> grad(grad(lambda x: x ** 3))(pargraph.tensor(2.0)).item()
    12.0
    """
    transformed = grad_and_value(func, argnums, has_aux)

    def gradient(*args: Any, **kwargs: Any) -> Any:
        grads, value = transformed(*args, **kwargs)
        return (grads, value[1]) if has_aux else grads

    return gradient


def vjp(func: Callable, *primals: Any, has_aux: bool = False) -> tuple:
    """``(func(*primals), vjp_fn)``: ``vjp_fn(cotangents)`` gives the gradients of the
    outputs, weighted by ``cotangents`` (the outputs' nesting), with respect to each primal,
    as ``torch.func.vjp``.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.func import vjp
    >>> out, vjp_fn = vjp(lambda x: x * 3, pargraph.tensor([1.0, 2.0]))
    >>> vjp_fn(pargraph.ones(2))[0].tolist()
    [3.0, 3.0]
    """
    args, entered, outer = _enter_arguments(primals, tuple(range(len(primals))))
    with enable_grad():
        out = func(*args)
    out, aux = out if has_aux else (out, None)
    outputs, spec = flatten(out)

    def vjp_fn(*cotangents: Any) -> tuple:
        given = cotangents[0] if len(cotangents) == 1 else cotangents
        weights, given_spec = flatten(given)
        if given_spec != spec:
            raise RuntimeError("Expected pytree structure of cotangents to be the same as "
                               "pytree structure of outputs to the function")
        return tuple(_gradients(outputs, entered, weights, outer))

    result = out if outer else unflatten(spec, iter([o.detach() for o in outputs]))
    return (result, vjp_fn, aux) if has_aux else (result, vjp_fn)


def jacrev(func: Callable, argnums: int | Sequence[int] = 0, *,
           has_aux: bool = False) -> Callable:
    """``func`` made to return its Jacobian with respect to the arguments ``argnums``: for
    an output of shape O and an input of shape I, a tensor of shape O + I (nests of them for
    nested outputs and inputs), one gradient per output element, as ``torch.func.jacrev``.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.func import jacrev
    >>> jacrev(lambda x: x ** 2)(pargraph.tensor([1.0, 2.0])).tolist()
    [[2.0, 0.0], [0.0, 4.0]]
    """
    def transformed(*args: Any, **kwargs: Any) -> Any:
        args, entered, outer = _enter_arguments(args, argnums)
        with enable_grad():
            out = func(*args, **kwargs)
        out, aux = out if has_aux else (out, None)
        outputs, spec = flatten(out)
        per_output = []
        for o in outputs:
            rows = []
            for k in range(o.numel()):  # one backward per output element
                one = np.zeros(o.numel(), dtype=o.dtype)
                one[k] = 1
                rows.append(_gradients([o], entered, [tensor(one.reshape(o.shape))], outer))
            per_input = []
            for a, (arg_spec, leaves) in enumerate(entered):
                jac = []
                for j, t in enumerate(leaves):
                    parts = [flatten(row[a])[0][j] for row in rows]
                    jac.append(stack(parts).reshape(*o.shape, *t.shape) if parts else
                               zeros_like(t).reshape(*o.shape, *t.shape))
                per_input.append(unflatten(arg_spec, iter(jac)))
            per_output.append(per_input[0] if isinstance(argnums, int) else tuple(per_input))
        result = unflatten(spec, iter(per_output))
        return (result, aux) if has_aux else result

    return transformed


def jacfwd(func: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
           *, randomness: str = "error") -> Callable:
    """The Jacobian, as ``torch.func.jacfwd`` gives it (computed by reverse mode here:
    :func:`jacrev`).

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.func import jacfwd
    >>> jacfwd(lambda x: x.sum() * x)(pargraph.tensor([1.0, 2.0])).tolist()
    [[4.0, 1.0], [2.0, 5.0]]
    """
    return jacrev(func, argnums, has_aux=has_aux)


def hessian(func: Callable, argnums: int | Sequence[int] = 0) -> Callable:
    """The Hessian of a scalar ``func``: ``jacfwd(jacrev(func))``.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.func import hessian
    >>> hessian(lambda x: (x ** 3).sum())(pargraph.tensor([1.0, 2.0])).tolist()
    [[6.0, 0.0], [0.0, 12.0]]
    """
    return jacfwd(jacrev(func, argnums), argnums)


def vmap(func: Callable, in_dims: Any = 0, out_dims: Any = 0, randomness: str = "error", *,
         chunk_size: int | None = None) -> Callable:
    """``func`` over the mapped dimension of its arguments (``in_dims``: an int or None per
    argument, or a nest matching it), its results stacked along ``out_dims``, as
    ``torch.func.vmap``: ``func`` runs once per element, each an independent branch of the
    graph (run side by side).

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.func import vmap
    >>> vmap(lambda x, y: x.dot(y), in_dims=(0, None))(pargraph.ones(3, 2),
    ...                                                 pargraph.tensor([1.0, 2.0])).tolist()
    [3.0, 3.0, 3.0]
    """
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or "
                           f"'same'. Got {randomness}")

    def transformed(*args: Any, **kwargs: Any) -> Any:
        dims = in_dims if isinstance(in_dims, tuple) else (in_dims,) * len(args)
        if len(dims) != len(args):
            raise ValueError(f"vmap(f, in_dims={in_dims}, ...)(<inputs>): in_dims is not "
                             f"compatible with the structure of `inputs`. in_dims has structure "
                             f"of length {len(dims)} but inputs has {len(args)} elements.")
        mapped: list[tuple[Any, Any, Any]] = []  # per argument: leaves, their dims, spec
        sizes = set()
        for arg, dim in zip(args, dims):
            leaves, spec = flatten(arg)
            leaf_dims = flatten(dim)[0] if not isinstance(dim, (int, type(None))) else \
                [dim] * len(leaves)
            for t, d in zip(leaves, leaf_dims):
                if d is not None:
                    if not isinstance(t, Tensor):
                        raise ValueError(f"vmap(f, in_dims={in_dims}, ...)(<inputs>): Got "
                                         f"in_dim={d} for an input but the input is of type "
                                         f"{type(t)}. We cannot vmap over non-Tensor arguments")
                    sizes.add(t.shape[d])
            mapped.append((leaves, leaf_dims, spec))
        if not sizes:
            raise ValueError(f"vmap(f, in_dims={in_dims}, ...)(<inputs>): at least one input "
                             "must be mapped (in_dims not all None)")
        if len(sizes) > 1:
            raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped "
                             f"dimension, got sizes {sorted(sizes)} for the mapped dimension")
        size = sizes.pop()
        start = get_rng_state()
        results = []
        for b in range(size):
            if randomness == "same":
                set_rng_state(start)
            sliced = [unflatten(spec, iter([t.select(d, b) if d is not None else t
                                            for t, d in zip(leaves, leaf_dims)]))
                      for leaves, leaf_dims, spec in mapped]
            results.append(func(*sliced, **kwargs))
            if randomness == "error" and not get_rng_state().equal(start):
                set_rng_state(start)
                raise RuntimeError("vmap: called random operation while in randomness error "
                                   "mode. Please either use the 'same' or 'different' "
                                   "randomness flags on vmap or perform the randomness "
                                   "operation out of vmap")
        flat = [flatten(r)[0] for r in results]
        spec = flatten(results[0])[1]
        outs = flatten(out_dims)[0] if not isinstance(out_dims, int) else \
            [out_dims] * len(flat[0])
        stacked = [stack([row[k] for row in flat], dim=d) for k, d in enumerate(outs)]
        return unflatten(spec, iter(stacked))

    return transformed


def functional_call(module: Any, parameter_and_buffer_dicts: Any, args: Any = None,
                    kwargs: dict | None = None, *, tie_weights: bool = True,
                    strict: bool = False) -> Any:
    """Call ``module`` with the tensors of ``parameter_and_buffer_dicts`` (one dict or a
    sequence, by dotted name) in place of its parameters and buffers, as
    ``torch.func.functional_call``; the module keeps its own afterwards. With
    ``tie_weights``, a tensor given for a shared parameter replaces it under all its names.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.func import functional_call
    >>> layer = pargraph.nn.Linear(2, 1)
    >>> params = {"weight": pargraph.ones(1, 2), "bias": pargraph.zeros(1)}
    >>> functional_call(layer, params, (pargraph.tensor([[1.0, 2.0]]),)).item()
    3.0
    """
    dicts = parameter_and_buffer_dicts if isinstance(parameter_and_buffer_dicts,
                                                     (list, tuple)) \
        else [parameter_and_buffer_dicts]
    given: dict = {}
    for d in dicts:
        for name, value in d.items():
            if name in given:
                raise ValueError(f"{name} appeared in multiple dictionaries; behavior of "
                                 "functional call is ambiguous")
            given[name] = value
    if strict:
        own = set(dict(module.named_parameters())) | set(dict(module.named_buffers()))
        missing, unexpected = sorted(own - set(given)), sorted(set(given) - own)
        if missing or unexpected:
            lines = ([f"Unexpected key(s): {', '.join(map(repr, unexpected))}."]
                     if unexpected else []) + \
                ([f"Missing key(s): {', '.join(map(repr, missing))}."] if missing else [])
            raise RuntimeError(f"Error(s) in reparametrizing for {type(module).__name__}:\n\t"
                               + "\n\t".join(lines))
    holders = [(registry, attr) for _, sub in module.named_modules()
               for registry in (sub._parameters, sub._buffers) for attr in registry]
    saved = []
    try:
        for name, value in given.items():
            registry, attr = _holder(module, name)
            original = registry[attr]
            places = [(r, a) for r, a in holders if r[a] is original] \
                if tie_weights and original is not None else [(registry, attr)]
            for r, a in places:
                saved.append((r, a, r[a]))
                r[a] = value
        args = () if args is None else args if isinstance(args, tuple) else (args,)
        return module(*args, **(kwargs or {}))
    finally:
        for registry, attr, original in reversed(saved):
            registry[attr] = original


def _holder(module: Any, name: str) -> tuple[dict, str]:
    """The registry (``_parameters`` or ``_buffers``) of the submodule that holds ``name``."""
    *path, attr = name.split(".")
    owner = module
    for part in path:
        owner = owner._modules.get(part) if owner is not None else None
        if owner is None:
            raise AttributeError(f"{type(module).__name__} has no submodule {part!r} "
                                 f"(in {name!r})")
    for registry in (owner._parameters, owner._buffers):
        if attr in registry:
            return registry, attr
    raise AttributeError(f"{type(owner).__name__} has no parameter or buffer {attr!r} "
                         f"(in {name!r})")
