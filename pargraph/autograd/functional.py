"""Gradients as values (``grad``) and checked against finite differences (``gradcheck``).

The backward graph is built by :mod:`pargraph.autograd.backward_graph`, through the driver in
:mod:`pargraph.autograd.engine`. Like the engine, these functions use the tensors they are
given (the ``engine.GradTarget`` interface: ``_node``, ``_wrap``, ``requires_grad``) and never
import the facade above."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pargraph import ops
from pargraph.autograd import engine, mode
from pargraph.autograd.engine import gradient_nodes
from pargraph.engine import execution
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
             retain_graph: bool | None = None, create_graph: bool = False,
             grad_variables: Any = None, inputs: Tensor | Sequence[Tensor] | None = None
             ) -> None:
    """Accumulate the gradients of ``tensors`` into the ``.grad`` of the leaves (and of the
    tensors that retain theirs; ``inputs``: of those tensors only), as
    ``torch.autograd.backward`` does.

    Examples
    --------
    >>> import pargraph
    >>> x = pargraph.tensor([1.0, 2.0], requires_grad=True)
    >>> pargraph.autograd.backward([(x * x).sum()]); x.grad
    tensor([2., 4.])
    """
    tensors = _as_list(tensors)
    seeds = _as_list(grad_tensors) or [None] * len(tensors)
    engine.backward(tensors, _seed_nodes(tensors, seeds), retain_graph, create_graph,
                    None if inputs is None else _as_list(inputs))


def grad(
    outputs: Tensor | Sequence[Tensor],
    inputs: Tensor | Sequence[Tensor],
    grad_outputs: Tensor | Sequence[Tensor | None] | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    only_inputs: bool = True,
    allow_unused: bool | None = None,
    is_grads_batched: bool = False,
    materialize_grads: bool = False,
) -> tuple[Tensor | None, ...]:
    """The gradients of ``outputs`` with respect to ``inputs``, without touching ``.grad``;
    an input the outputs do not depend on raises, or with ``allow_unused`` gets None (zeros
    with ``materialize_grads``).

    Examples
    --------
    >>> import pargraph
    >>> x = pargraph.tensor(3.0, requires_grad=True)
    >>> (dx,) = pargraph.autograd.grad(x ** 3, x, create_graph=True)
    >>> dx, pargraph.autograd.grad(dx, x)[0]
    (tensor(27., grad_fn=<MulBackward0>), tensor(18.))
    """
    if materialize_grads and allow_unused is False:
        raise ValueError("Expected allow_unused to be True or not passed when "
                         "materialize_grads=True, but got: allow_unused=False.")
    if is_grads_batched:
        raise NotImplementedError("autograd.grad: is_grads_batched=True is not supported; "
                                  "pargraph.func.vmap over a vjp gives the batched gradients")
    allow_unused = bool(allow_unused) or materialize_grads
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
        index = next(k for k, g in enumerate(grads) if g is None)
        raise RuntimeError(f"The differentiated Tensor at index {index} appears to not have "
                           "been used in the graph. Set allow_unused=True if this is the "
                           "desired behavior.")
    if materialize_grads:
        grads = [ops.expand(ops.constant(np.zeros((), x.dtype)), shape=tuple(x.shape))
                 if g is None else g for x, g in zip(inputs, grads)]
    targets = [g for g in grads if g is not None] + [out._node for out in outputs]
    execution.realize(targets, release=() if retain_graph else region)
    return tuple(None if g is None else x._wrap(g) for x, g in zip(inputs, grads))


def Variable(data: Tensor, requires_grad: bool = False, volatile: bool = False) -> Tensor:  # noqa: N802
    """PyTorch's old wrapper: a tensor with ``data``'s values that requires grad or not (a
    Variable is a tensor since PyTorch 0.4).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.autograd.Variable(pargraph.ones(2), requires_grad=True).requires_grad
    True
    """
    out = data.detach()
    if requires_grad:
        out.requires_grad_(True)
    return out


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


def gradgradcheck(
    fn: Callable[..., Tensor | Sequence[Tensor]],
    inputs: Tensor | Sequence[Any],
    grad_outputs: Tensor | Sequence[Tensor] | None = None,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    gen_non_contig_grad_outputs: bool = False,
    raise_exception: bool = True,
) -> bool:
    """Check the second derivatives of ``fn`` at ``inputs``: :func:`gradcheck` of its first
    derivatives (taken with ``create_graph=True``) as a function of the inputs and of
    ``grad_outputs`` (random float64 tensors by default, as in PyTorch).

    Examples
    --------
    >>> import pargraph
    >>> x = pargraph.randn(3, dtype=pargraph.float64, requires_grad=True)
    >>> pargraph.autograd.gradgradcheck(lambda t: (t ** 3).sum(), (x,))
    True
    """
    inputs = tuple(_as_list(inputs))
    outputs = [o for o in _as_list(fn(*inputs)) if ops.is_floating(o.dtype)]
    if grad_outputs is None:
        rng = np.random.default_rng()
        grad_outputs = [o._apply(ops.constant, rng.standard_normal(o.shape)).requires_grad_()
                        for o in outputs]
    grad_outputs = tuple(_as_list(grad_outputs))
    wrt = [k for k, x in enumerate(inputs) if _is_tensor(x) and x.requires_grad]

    def first_derivatives(*args: Any) -> tuple:
        xs, seeds = args[:len(inputs)], args[len(inputs):]
        outs = [o for o in _as_list(fn(*xs)) if ops.is_floating(o.dtype)]
        grads = grad(outs, [xs[k] for k in wrt], list(seeds), create_graph=True,
                     allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return gradcheck(first_derivatives, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)


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
        fresh = original._apply(ops.constant, np.array(value))
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


# --- torch.autograd.functional: derivatives of a function at a point ------------------------


def _as_tuple(value: Any, what: str, name: str) -> tuple[bool, tuple]:
    """``(whether value was a tuple, value as a tuple)``; each element must be a tensor."""
    is_tuple = isinstance(value, tuple)
    values = value if is_tuple else (value,)
    for k, v in enumerate(values):
        if not _is_tensor(v):
            where = f"value at index {k}" if is_tuple else f"given {what}"
            raise TypeError(f"The {what} given to {name} must be either a Tensor or a tuple of "
                            f"Tensors but the {where} has type {type(v)}.")
    return is_tuple, values


def _preprocessed(values: tuple, create_graph: bool, need_graph: bool) -> tuple:
    """The function's inputs as new tensors to differentiate against: attached to the graph
    they came from when the result must be differentiable again, else detached."""
    return tuple(v.view_as(v) if create_graph and v.requires_grad
                 else v.detach().requires_grad_(need_graph) for v in values)


def _postprocessed(values: tuple, create_graph: bool) -> tuple:
    return values if create_graph else tuple(v.detach() for v in values)


def _unpacked(result: Any, tuples: Any) -> Any:
    """``result`` (tuples) with the levels whose argument was not a tuple unpacked."""
    if isinstance(tuples, tuple):
        if not tuples[1]:
            result = tuple(row[0] for row in result)
        return result if tuples[0] else result[0]
    return result if tuples else result[0]


def _checked_requires_grad(values: tuple, kind: str, strict: bool) -> None:
    if not strict:
        return
    for k, v in enumerate(values):
        if v is None:
            raise RuntimeError(f"The output of the user-provided function is independent of "
                               f"input {k}. This is not allowed in strict mode.")
        if not v.requires_grad:
            raise RuntimeError({
                "hessian": f"The hessian of the user-provided function with respect to input "
                           f"{k} is independent of the input. This is not allowed in strict "
                           "mode.",
                "jacobian": "While computing the hessian, found that the jacobian of the "
                            f"user-provided function with respect to input {k} is independent "
                            "of the input. This is not allowed in strict mode.",
                "grad_inputs": f"The gradient with respect to input {k} is independent of the "
                               "inputs of the user-provided function. This is not allowed in "
                               "strict mode.",
            }.get(kind, f"Output {k} of the user-provided function does not require "
                        "gradients. The outputs must be computed in a differentiable manner "
                        "from the input when running in strict mode."))


_INDEPENDENT = {
    "back": "The output of the user-provided function is independent of input {}. This is "
            "not allowed in strict mode.",
    "back_trick": "The gradient with respect to the input is independent of entry {} in the "
                  "grad_outputs when using the double backward trick to compute forward mode "
                  "gradients. This is not allowed in strict mode.",
    "double_back": "The jacobian of the user-provided function is independent of input {}. "
                   "This is not allowed in strict mode.",
    "double_back_trick": "The hessian of the user-provided function is independent of entry "
                         "{} in the grad_jacobian. This is not allowed in strict mode as it "
                         "prevents from using the double backward trick to replace forward "
                         "mode AD.",
}


def _zeros_like(t: Tensor, requires_grad: bool = False) -> Tensor:
    zeros = t._apply(ops.constant, np.zeros(t.shape, dtype=t.dtype))
    return zeros.requires_grad_(True) if requires_grad else zeros


def _filled(grads: tuple, refs: tuple, strict: bool, stage: str) -> tuple:
    """Zeros for the inputs no gradient reached (strict mode raises)."""
    filled = []
    for k, (g, ref) in enumerate(zip(grads, refs)):
        if g is None:
            if strict:
                raise RuntimeError(_INDEPENDENT[stage].format(k))
            g = _zeros_like(ref)
        filled.append(g)
    return tuple(filled)


def _grads_of(outputs: tuple, inputs: tuple, seeds: tuple | None = None,
              create_graph: bool = False) -> tuple:
    """The gradients of the outputs that require grad with respect to ``inputs`` (None where
    none reaches), built and not run; ``seeds``: one per output (None: ones)."""
    seeds = seeds if seeds is not None else (None,) * len(outputs)
    kept = [(out, seed) for out, seed in zip(outputs, seeds)
            if out is not None and out.requires_grad]
    if not kept:
        return (None,) * len(inputs)
    outs = [out for out, _ in kept]
    pairs, _ = gradient_nodes(outs, _seed_nodes(outs, [seed for _, seed in kept]),
                              {id(x._node) for x in inputs}, create_graph)
    found = {id(node): g for node, g in pairs}
    return tuple(None if found.get(id(x._node)) is None else x._wrap(found[id(x._node)])
                 for x in inputs)


def _validated_v(v: Any, refs: tuple, refs_tuple: bool, name: str, create_graph: bool) -> tuple:
    _, v = _as_tuple(v, "v", name)
    v = _preprocessed(v, create_graph, need_graph=False)
    if len(v) != len(refs):
        raise RuntimeError("v is a tuple of invalid length: should be "
                           f"{len(refs)} but got {len(v)}." if refs_tuple
                           else "The given v should contain a single Tensor.")
    for k, (entry, ref) in enumerate(zip(v, refs)):
        if tuple(entry.shape) != tuple(ref.shape):
            prefix = f"Entry {k} in " if refs_tuple else ""
            raise RuntimeError(f"{prefix}v has invalid size: should be "
                               f"{_size(ref)} but got {_size(entry)}.")
    return v


def _size(t: Tensor) -> str:
    return f"torch.Size({list(t.shape)})"


def vjp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False,
        strict: bool = False) -> tuple:
    """``(func(inputs), v^T J)``: the vector-Jacobian product at ``inputs``, as
    ``torch.autograd.functional.vjp`` (``v`` may be None for a one-element output).

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.autograd.functional import vjp
    >>> vjp(lambda x: x ** 2, pargraph.tensor([1.0, 2.0]), pargraph.ones(2))[1]
    tensor([2., 4.])
    """
    with mode.enable_grad():
        inputs_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        inputs = _preprocessed(inputs, create_graph, need_graph=True)
        outputs_tuple, outputs = _as_tuple(func(*inputs), "outputs of the user-provided "
                                           "function", "vjp")
        _checked_requires_grad(outputs, "outputs", strict)
        if v is not None:
            v = _validated_v(v, outputs, outputs_tuple, "vjp", create_graph)
        elif len(outputs) != 1 or outputs[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the user-provided function "
                               "returns a single Tensor with a single element.")
        with mode.set_grad_enabled(create_graph or mode.is_grad_enabled()):
            found = _filled(_grads_of(outputs, inputs, v, create_graph), inputs, strict, "back")
    return (_unpacked(_postprocessed(outputs, create_graph), outputs_tuple),
            _unpacked(_postprocessed(found, create_graph), inputs_tuple))


def jvp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False,
        strict: bool = False) -> tuple:
    """``(func(inputs), J v)``: the Jacobian-vector product at ``inputs`` by the double
    backward trick, as ``torch.autograd.functional.jvp``.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.autograd.functional import jvp
    >>> jvp(lambda x: x ** 2, pargraph.tensor([1.0, 2.0]), pargraph.ones(2))[1]
    tensor([2., 4.])
    """
    with mode.enable_grad():
        inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
        inputs = _preprocessed(inputs, create_graph, need_graph=True)
        if v is not None:
            v = _validated_v(v, inputs, inputs_tuple, "jvp", create_graph)
        elif len(inputs) != 1 or inputs[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the input to the "
                               "user-provided function is a single Tensor with a single "
                               "element.")
        outputs_tuple, outputs = _as_tuple(func(*inputs), "outputs of the user-provided "
                                           "function", "jvp")
        _checked_requires_grad(outputs, "outputs", strict)
        seeds = tuple(_zeros_like(out, requires_grad=True) for out in outputs)
        grad_inputs = _grads_of(outputs, inputs, seeds, create_graph=True)
        _checked_requires_grad(grad_inputs, "grad_inputs", strict)
        with mode.set_grad_enabled(create_graph or mode.is_grad_enabled()):
            found = _filled(_grads_of(grad_inputs, seeds, v, create_graph), outputs, strict,
                            "back_trick")
    return (_unpacked(_postprocessed(outputs, create_graph), outputs_tuple),
            _unpacked(_postprocessed(found, create_graph), outputs_tuple))


def jacobian(func: Callable, inputs: Any, create_graph: bool = False, strict: bool = False,
             vectorize: bool = False, strategy: str = "reverse-mode") -> Any:
    """The Jacobian of ``func`` at ``inputs``, as ``torch.autograd.functional.jacobian``: for
    each output and input, a tensor of shape ``output.shape + input.shape``. Each row is a
    backward pass of its own, and all of them run as one graph, side by side (``vectorize``
    and the forward-mode strategy give the same values).

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.autograd.functional import jacobian
    >>> jacobian(lambda x: x ** 2, pargraph.tensor([1.0, 2.0]))
    tensor([[2., 0.],
            [0., 4.]])
    """
    if strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode". '
                             'Hint: If your function has more outputs than inputs, '
                             '"forward-mode" tends to be more performant. Otherwise, prefer to '
                             'use "reverse-mode".')
    if strategy == "forward-mode" and create_graph:
        raise NotImplementedError('torch.autograd.functional.jacobian: `create_graph=True` and '
                                  '`strategy="forward-mode"` are not supported together (yet). '
                                  'Please either set `create_graph=False` or '
                                  '`strategy="reverse-mode"`.')
    if strategy == "forward-mode" and not vectorize:
        raise NotImplementedError("Computing Jacobian using forward-AD or forward-over-reverse "
                                  "Hessian isonly implemented for `vectorize=True`.")
    with mode.enable_grad():
        inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _preprocessed(inputs, create_graph, need_graph=True)
        outputs_tuple, outputs = _as_tuple(func(*inputs), "outputs of the user-provided "
                                           "function", "jacobian")
        _checked_requires_grad(outputs, "outputs", strict)
        result = []
        for i, out in enumerate(outputs):
            rows: list[list] = [[] for _ in inputs]
            for j in range(out.numel() if out.requires_grad else 0):
                seed = np.zeros(out.numel(), dtype=out.dtype)
                seed[j] = 1
                grads = _grads_of((out,), inputs, (seed.reshape(out.shape),), create_graph)
                for k, g in enumerate(grads):
                    if g is None and strict:
                        raise RuntimeError(f"Output {i} of the user-provided function is "
                                           f"independent of input {k}. This is not allowed "
                                           "in strict mode.")
                    rows[k].append(g)
            per_input = []
            for k, x in enumerate(inputs):
                shape = (*out.shape, *x.shape)
                present = [g for g in rows[k] if g is not None]
                if len(present) < out.numel():  # no gradient reaches some rows: zeros there
                    rows[k] = [_zeros_like(x) if g is None else g for g in rows[k]]
                if not rows[k]:
                    per_input.append(x._apply(ops.constant, np.zeros(shape, dtype=x.dtype)))
                    continue
                stacked = ops.stack([g._node for g in rows[k]], 0)
                per_input.append(x._apply(ops.reshape, stacked, shape=shape))
            result.append(_postprocessed(tuple(per_input), create_graph))
    return _unpacked(tuple(result), (outputs_tuple, inputs_tuple))


def hessian(func: Callable, inputs: Any, create_graph: bool = False, strict: bool = False,
            vectorize: bool = False, outer_jacobian_strategy: str = "reverse-mode") -> Any:
    """The Hessian of a function with one single-element output at ``inputs``, as
    ``torch.autograd.functional.hessian``: per pair of inputs, a tensor of shape
    ``input_i.shape + input_j.shape``.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.autograd.functional import hessian
    >>> hessian(lambda x: (x ** 3).sum(), pargraph.tensor([1.0, 2.0]))
    tensor([[ 6.,  0.],
            [ 0., 12.]])
    """
    inputs_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")

    def single_output(*args: Any) -> Any:
        out = func(*args)
        out_tuple, outs = _as_tuple(out, "outputs of the user-provided function", "hessian")
        _checked_requires_grad(outs, "outputs", strict)
        if out_tuple:
            raise RuntimeError("The function given to hessian should return a single Tensor")
        if out.numel() != 1:
            raise RuntimeError("The Tensor returned by the function given to hessian should "
                               "contain a single element")
        return out.squeeze()

    def jacobian_of(*args: Any) -> Any:
        found = jacobian(single_output, args, create_graph=True)
        _checked_requires_grad(found, "jacobian", strict)
        return found

    found = jacobian(jacobian_of, inputs, create_graph=create_graph, strict=strict,
                     vectorize=vectorize, strategy=outer_jacobian_strategy)
    return _unpacked(found, (inputs_tuple, inputs_tuple))


def vhp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False,
        strict: bool = False) -> tuple:
    """``(func(inputs), v^T H)`` for a function with one single-element output, as
    ``torch.autograd.functional.vhp``.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.autograd.functional import vhp
    >>> vhp(lambda x: (x ** 3).sum(), pargraph.tensor([1.0, 2.0]), pargraph.ones(2))[1]
    tensor([ 6., 12.])
    """
    return _hessian_product(func, inputs, v, create_graph, strict, "vhp")


def hvp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False,
        strict: bool = False) -> tuple:
    """``(func(inputs), H v)`` for a function with one single-element output, by the double
    backward trick, as ``torch.autograd.functional.hvp``.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.autograd.functional import hvp
    >>> hvp(lambda x: (x ** 3).sum(), pargraph.tensor([1.0, 2.0]), pargraph.ones(2))[1]
    tensor([ 6., 12.])
    """
    return _hessian_product(func, inputs, v, create_graph, strict, "hvp")


def _hessian_product(func: Callable, inputs: Any, v: Any, create_graph: bool, strict: bool,
                     name: str) -> tuple:
    with mode.enable_grad():
        inputs_tuple, inputs = _as_tuple(inputs, "inputs", name)
        inputs = _preprocessed(inputs, create_graph, need_graph=True)
        if v is not None:
            v = _validated_v(v, inputs, inputs_tuple, name, create_graph)
        elif len(inputs) != 1 or inputs[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the input to the "
                               "user-provided function is a single Tensor with a single "
                               "element.")
        outputs_tuple, outputs = _as_tuple(func(*inputs), "outputs of the user-provided "
                                           "function", name)
        _checked_requires_grad(outputs, "outputs", strict)
        if outputs_tuple:
            raise RuntimeError(f"The function given to {name} should return a single Tensor")
        if outputs[0].numel() != 1:
            raise RuntimeError(f"The Tensor returned by the function given to {name} should "
                               "contain a single element")
        first = _grads_of(outputs, inputs, create_graph=True)
        _checked_requires_grad(first, "jacobian", strict)
        grad_mode_after = create_graph or mode.is_grad_enabled()
        if name == "vhp":
            with mode.set_grad_enabled(grad_mode_after):
                found = _filled(_grads_of(first, inputs, v, create_graph), inputs, strict,
                                "double_back")
        else:
            seeds = tuple(_zeros_like(x, requires_grad=True) for x in inputs)
            double = _grads_of(first, inputs, seeds, create_graph=True)
            _checked_requires_grad(first, "hessian", strict)
            with mode.set_grad_enabled(grad_mode_after):
                found = _filled(_grads_of(double, seeds, v, create_graph), inputs, strict,
                                "double_back_trick")
    return (_unpacked(_postprocessed(outputs, create_graph), outputs_tuple),
            _unpacked(_postprocessed(found, create_graph), inputs_tuple))
