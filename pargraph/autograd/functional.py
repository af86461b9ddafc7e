"""Gradients as values (``grad``) and checked against finite differences (``gradcheck``).

The backward graph is built by :mod:`pargraph.autograd.backward_graph`, through the driver in
:mod:`pargraph.autograd.engine`. Like the engine, these functions use the tensors they are
given (the ``engine.GradTarget`` interface: ``_node``, ``_wrap``, ``requires_grad``) and never
import the facade above."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pargraph import execution, ops
from pargraph.autograd import engine
from pargraph.autograd.engine import gradient_nodes
from pargraph.remote.recovery import fetch

#: The facade's Tensor, as these functions see it: anything with ``_node``, ``requires_grad``,
#: ``_wrap`` (a layer below the facade does not import it).
Tensor = Any


def _is_tensor(value: Any) -> bool:
    return hasattr(value, "_node") and hasattr(value, "requires_grad")


def _as_list(value: Any) -> list:
    if value is None:
        return []
    return [value] if _is_tensor(value) else list(value)


def _seed_nodes(outputs: list, grad_outputs: list) -> list:
    """The user's seeds as nodes of each output's dtype (``None`` stays: ones)."""
    nodes = []
    for out, seed in zip(outputs, grad_outputs):
        if seed is None:
            nodes.append(None)
        elif _is_tensor(seed):
            nodes.append(seed._node if seed.dtype == out.dtype else seed.to(out.dtype)._node)
        else:
            nodes.append(ops.constant(np.asarray(seed, dtype=out.dtype)))
    return nodes


def backward(tensors: Tensor | Sequence[Tensor],
             grad_tensors: Tensor | Sequence[Any] | None = None,
             retain_graph: bool | None = None, create_graph: bool = False) -> None:
    """Accumulate the gradients of ``tensors`` into the ``.grad`` of the leaves (and of the
    tensors that retain theirs), as ``torch.autograd.backward`` does.

    Examples
    --------
    >>> import pargraph
    >>> x = pargraph.tensor([1.0, 2.0], requires_grad=True)
    >>> pargraph.autograd.backward([(x * x).sum()]); x.grad
    tensor([2., 4.])
    """
    tensors = _as_list(tensors)
    seeds = _as_list(grad_tensors) or [None] * len(tensors)
    engine.backward(tensors, _seed_nodes(tensors, seeds), retain_graph, create_graph)


def grad(
    outputs: Tensor | Sequence[Tensor],
    inputs: Tensor | Sequence[Tensor],
    grad_outputs: Tensor | Sequence[Tensor | None] | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    allow_unused: bool = False,
) -> tuple[Tensor | None, ...]:
    """The gradients of ``outputs`` with respect to ``inputs``, without touching ``.grad``.

    Examples
    --------
    >>> import pargraph
    >>> x = pargraph.tensor(3.0, requires_grad=True)
    >>> (dx,) = pargraph.autograd.grad(x ** 3, x, create_graph=True)
    >>> dx, pargraph.autograd.grad(dx, x)[0]
    (tensor(27., grad_fn=<MulBackward0>), tensor(18.))
    """
    outputs, inputs = _as_list(outputs), _as_list(inputs)
    seeds = _as_list(grad_outputs) or [None] * len(outputs)
    if len(seeds) != len(outputs):
        raise RuntimeError(f"grad_outputs has {len(seeds)} entries but outputs has "
                           f"{len(outputs)}")
    for k, x in enumerate(inputs):
        if not x.requires_grad:
            raise RuntimeError(f"One of the differentiated Tensors (input {k}) does not "
                               "require grad")
    retain_graph = create_graph if retain_graph is None else retain_graph
    pairs, region = gradient_nodes(outputs, _seed_nodes(outputs, seeds),
                                   {id(x._node) for x in inputs}, create_graph)
    found = {id(node): g for node, g in pairs}
    grads = [found.get(id(x._node)) for x in inputs]
    if not allow_unused and any(g is None for g in grads):
        raise RuntimeError("One of the differentiated Tensors appears to not have been used in "
                           "the graph. Set allow_unused=True if this is the desired behavior.")
    targets = [g for g in grads if g is not None] + [out._node for out in outputs]
    execution.realize(targets, release=() if retain_graph else region)
    return tuple(None if g is None else x._wrap(g) for x, g in zip(inputs, grads))


class GradcheckError(RuntimeError):
    """Analytical and numerical gradients disagree."""


def gradcheck(
    fn: Callable[..., Tensor | Sequence[Tensor]],
    inputs: Tensor | Sequence[Any],
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
) -> bool:
    """Check the gradients of ``fn`` at ``inputs`` against central finite differences.

    Inputs that require grad must be float64. All perturbed evaluations run as one dask graph,
    and so do all the backward passes.

    Examples
    --------
    >>> import pargraph
    >>> x = pargraph.randn(3, dtype=pargraph.float64, requires_grad=True)
    >>> pargraph.autograd.gradcheck(lambda t: (t.sin() * t).sum(), (x,))
    True
    """
    inputs = tuple(_as_list(inputs))
    checked = [k for k, x in enumerate(inputs) if _is_tensor(x) and x.requires_grad]
    if not checked:
        raise ValueError("gradcheck: expected at least one input tensor that requires grad")
    for k in checked:
        if inputs[k].dtype != np.float64:
            raise ValueError(f"gradcheck: input {k} is {inputs[k].dtype}; finite differences "
                             "need float64 inputs")
    outputs = [o for o in _as_list(fn(*inputs)) if ops.is_floating(o.dtype)]
    analytical = _analytical_jacobians(outputs, [inputs[k] for k in checked])
    numerical = _numerical_jacobians(fn, inputs, checked, eps)
    for j, k in enumerate(checked):
        a, n = analytical[j], numerical[j]
        if not np.allclose(a, n, atol=atol, rtol=rtol):
            if not raise_exception:
                return False
            raise GradcheckError(
                f"Jacobian mismatch with respect to input {k} (rows: output elements, columns: "
                f"input elements),\nnumerical:\n{n}\nanalytical:\n{a}"
            )
    return True


def _analytical_jacobians(outputs: list[Tensor], inputs: list[Tensor]) -> list[np.ndarray]:
    rows = []
    wrt = {id(x._node) for x in inputs}
    for out in outputs:
        if not out.requires_grad:  # independent of every input: a zero Jacobian
            rows.extend({} for _ in range(out.numel()))
            continue
        for j in range(out.numel()):
            seed = np.zeros(out.numel(), dtype=out.dtype)
            seed[j] = 1
            pairs, _ = gradient_nodes([out], [ops.constant(seed.reshape(out.shape))], wrt,
                                      False)
            rows.append({id(node): g for node, g in pairs})
    execution.realize([g for row in rows for g in row.values()])
    jacobians = []
    for x in inputs:
        jacobian = np.zeros((len(rows), x.numel()))
        for r, row in enumerate(rows):
            g = row.get(id(x._node))
            if g is not None:
                jacobian[r] = fetch(g).reshape(-1)
        jacobians.append(jacobian)
    return jacobians


def _numerical_jacobians(fn: Callable, inputs: tuple, checked: list[int], eps: float):
    """Central differences. ``fn`` runs with grad enabled and inputs that require grad as the
    originals do, so that functions which differentiate internally (second derivatives) work."""
    base = [x.detach().numpy() if _is_tensor(x) else x for x in inputs]

    def as_input(value, original):
        if not _is_tensor(original):
            return value
        fresh = original._wrap(ops.constant(np.array(value)))
        return fresh.requires_grad_(original.requires_grad)

    evaluations = []  # per checked input, per element: (outputs at +eps, outputs at -eps)
    for k in checked:
        per_element = []
        for i in range(base[k].size):
            pair = []
            for step in (eps, -eps):
                shifted = base[k].copy().reshape(-1)
                shifted[i] += step
                args = [as_input(b, x) for b, x in zip(base, inputs)]
                args[k] = as_input(shifted.reshape(base[k].shape), inputs[k])
                pair.append([o.detach() for o in _as_list(fn(*args)) if ops.is_floating(o.dtype)])
            per_element.append(pair)
        evaluations.append(per_element)
    execution.realize([o._node for per in evaluations for pair in per for outs in pair
                       for o in outs])
    jacobians = []
    for per_element in evaluations:
        columns = []
        for plus, minus in per_element:
            diffs = [(p.numpy() - m.numpy()).reshape(-1) / (2 * eps) for p, m in zip(plus, minus)]
            columns.append(np.concatenate(diffs) if diffs else np.zeros(0))
        jacobians.append(np.stack(columns, axis=1))
    return jacobians
