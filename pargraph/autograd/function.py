"""``autograd.Function``: a user's op with its own forward and backward, as in PyTorch.

``MyOp.apply(*args)`` runs ``MyOp.forward(ctx, *args)`` with grad mode off: the tensor ops it
uses record ordinary (lazy) nodes inside a module scope named after the class, so they show up
in traces and the dashboard under that name. Each output is then wrapped in one node of the
class's own primitive (an identity on the forward's output whose inputs are also the tensor
arguments): that node carries the autograd history, and its vjp calls ``MyOp.backward(ctx,
*grad_outputs)`` while the backward graph is built. The tensor ops ``backward`` uses become the
backward graph's nodes for this op and run with the rest of the step, like a built-in vjp's.

A backward graph that contains a user's function is generated on every call, never replayed
from a template: ``backward`` is arbitrary Python and may look at anything in ``ctx``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pargraph import dtypes
from pargraph.autograd.mode import no_grad
from pargraph.graph import grad_mode, module_scope
from pargraph.ops import Primitive, constant, expand


class FunctionCtx:
    """What ``forward`` leaves for ``backward``: saved tensors, ``needs_input_grad``, and any
    attribute the user sets."""

    def __init__(self, needs_input_grad: tuple[bool, ...]) -> None:
        self.needs_input_grad = needs_input_grad
        self.materialize_grads = True
        self._saved: tuple = ()
        self._non_differentiable: set[int] = set()
        self._cache: tuple[Any, tuple] | None = None

    def save_for_backward(self, *tensors: Any) -> None:
        """Keep tensors (or None) for ``backward``; read them back as ``saved_tensors``."""
        for t in tensors:
            if t is not None and not hasattr(t, "_node"):
                raise TypeError(f"save_for_backward can only save variables, but argument "
                                f"{tensors.index(t)} is of type {type(t).__name__}")
        self._saved = tensors

    @property
    def saved_tensors(self) -> tuple:
        return self._saved

    def mark_non_differentiable(self, *outputs: Any) -> None:
        """These outputs get no gradient (integer indices, masks)."""
        self._non_differentiable.update(id(t) for t in outputs)

    def set_materialize_grads(self, value: bool) -> None:
        """Whether ``backward`` sees zeros (True, the default) or None for outputs without
        a gradient."""
        self.materialize_grads = value

    def mark_dirty(self, *tensors: Any) -> None:
        raise NotImplementedError("autograd.Function: mark_dirty (a forward that changes its "
                                  "inputs in place) is not supported; return new tensors")

    def structure(self, node: Any) -> tuple | None:
        """What a backward can read here, for a structure key: the saved tensors and tensor
        attributes as references to ``node`` (the op's output) or its inputs, other
        attributes by type and value. None when something is neither (a tensor computed in
        ``setup_context``, an object that is not a plain value): the backward must run."""
        parts: list[Any] = [self.needs_input_grad, self.materialize_grads]
        if not self._saved and self.__dict__.keys() <= _OWN:  # nothing of the user's
            return tuple(parts)
        for name, value in (("", self._saved), *self.__dict__.items()):
            if name not in _OWN:
                described = _described(value, node)
                if described is _UNKNOWN:
                    return None
                parts.append((name, described))
        return tuple(parts)


#: FunctionCtx's own attributes: the rest are the user's.
_OWN = frozenset({"needs_input_grad", "materialize_grads", "_saved", "_non_differentiable",
                  "_cache", "_args", "_outputs", "_wrap"})
#: A value :meth:`FunctionCtx.structure` cannot describe.
_UNKNOWN = object()
_PLAIN = (int, float, bool, complex, str, bytes, type(None), np.generic, np.dtype, dtypes.dtype)


def _described(value: Any, node: Any) -> Any:
    """``value`` in a structure key: a tensor as ``("output",)`` or ``("input", j)`` of
    ``node``; a plain value with its type (1 and 1.0 and True hash alike); sequences item by
    item; anything else :data:`_UNKNOWN`."""
    if hasattr(value, "_node"):
        if value._node is node:
            return ("output",)
        for j, i in enumerate(node.inputs):
            if i is value._node:
                return ("input", j)
        return _UNKNOWN
    if isinstance(value, _PLAIN):
        return (type(value), value)
    if isinstance(value, (tuple, list)):
        items = tuple(_described(v, node) for v in value)
        return _UNKNOWN if any(i is _UNKNOWN for i in items) else (type(value), items)
    return _UNKNOWN


def _passthrough(out: Any, *inputs: Any, **attrs: Any) -> Any:
    """A function node's forward: the value the user's forward computed."""
    return out


def _shape_of_output(out: Any, *inputs: Any, **attrs: Any) -> tuple:
    return out.shape, out.dtype


class _FunctionMeta(type):
    """Gives every Function subclass its own (unregistered) primitive."""

    def __init__(cls, name: str, bases: tuple, namespace: dict) -> None:
        super().__init__(name, bases, namespace)
        cls._primitive = Primitive(name, _passthrough, _shape_of_output,
                                   grad_name=f"{name}Backward", view=True)
        cls._primitive.defvjp_at(cls._vjp_at)
        cls._primitive.replayable = False


class Function(metaclass=_FunctionMeta):
    """Subclass with static ``forward(ctx, *args)`` and ``backward(ctx, *grad_outputs)`` (or
    ``forward(*args)`` plus ``setup_context(ctx, inputs, output)``), then call ``.apply``.

    Examples
    --------
    >>> import pargraph
    >>> class Square(pargraph.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         ctx.save_for_backward(x)
    ...         return x * x
    ...     @staticmethod
    ...     def backward(ctx, grad):
    ...         x, = ctx.saved_tensors
    ...         return 2 * x * grad
    >>> x = pargraph.tensor([3.0], requires_grad=True)
    >>> Square.apply(x).sum().backward(); x.grad
    tensor([6.])
    """

    @staticmethod
    def forward(ctx: FunctionCtx, *args: Any) -> Any:
        raise NotImplementedError("You must implement the forward function for custom "
                                  "autograd.Function.")

    @staticmethod
    def backward(ctx: FunctionCtx, *grad_outputs: Any) -> Any:
        raise NotImplementedError("You must implement either the backward or vjp method for "
                                  "your custom autograd.Function to use it with backward mode "
                                  "AD.")

    setup_context = None

    @classmethod
    def apply(cls, *args: Any) -> Any:
        tensors = [a for a in args if hasattr(a, "_node")]
        ctx = FunctionCtx(tuple(hasattr(a, "_node") and a.requires_grad and grad_mode.enabled
                                for a in args))
        with no_grad(), module_scope(cls.__name__):
            if cls.setup_context is None:
                outputs = cls.forward(ctx, *args)
            else:
                outputs = cls.forward(*args)
                cls.setup_context(ctx, args, outputs)
        single = not isinstance(outputs, tuple)
        outputs = (outputs,) if single else outputs
        if not any(ctx.needs_input_grad) or not all(hasattr(o, "_node") for o in outputs):
            if any(ctx.needs_input_grad):
                raise TypeError(f"{cls.__name__}.forward must return tensors (or a tuple of "
                                f"them) to be differentiated")
            return outputs[0] if single else outputs
        ctx._outputs = outputs
        ctx._args = args
        ctx._wrap = type(tensors[0])._wrap
        inputs = tuple(t._node for t in tensors)
        wrapped = []
        for k, o in enumerate(outputs):
            if id(o) in ctx._non_differentiable:
                wrapped.append(o)
                continue
            node = cls._primitive(o._node, *inputs, output=k)
            node.context = ctx  # never sent: a task carries its nodes' ops and attributes
            wrapped.append(o._wrap(node))
        return wrapped[0] if single else tuple(wrapped)

    @classmethod
    def _vjp_at(cls, position: int):
        if position == 0:
            return None  # the forward's own output: computed without history

        def vjp(g, out, *inputs, output):
            return cls._input_grads(out.context, output, g)[position - 1]
        return vjp

    @classmethod
    def _input_grads(cls, ctx: FunctionCtx, output: int, g: Any) -> tuple:
        """The gradient node for each tensor argument, from one call of ``backward`` per
        output gradient (cached: the vjp is asked once per input)."""
        if ctx._cache is not None and ctx._cache[0] is g:
            return ctx._cache[1]
        grad_outputs = []
        for k, o in enumerate(ctx._outputs):
            if k == output:
                grad_outputs.append(ctx._wrap(g))
            elif ctx.materialize_grads:
                grad_outputs.append(ctx._wrap(_zeros_like(o)))
            else:
                grad_outputs.append(None)
        returned = cls.backward(ctx, *grad_outputs)
        returned = returned if isinstance(returned, tuple) else (returned,)
        if len(returned) != len(ctx._args):
            raise RuntimeError(f"function {cls.__name__}Backward returned an incorrect number of "
                               f"gradients (expected {len(ctx._args)}, got {len(returned)})")
        grads = [gradient_node(arg, grad, k, f"{cls.__name__}Backward")
                 for k, (arg, grad) in enumerate(zip(ctx._args, returned))
                 if hasattr(arg, "_node")]
        ctx._cache = (g, tuple(grads))
        return ctx._cache[1]


def gradient_node(arg: Any, grad: Any, index: int, backward: str) -> Any:
    """The node of what a user's ``backward`` returned for tensor ``arg`` (argument
    ``index``): None for None (no gradient reaches ``arg`` that way, as in PyTorch), a
    constant for an array, checked against ``arg``'s shape."""
    if grad is None:
        return None
    grad = grad._node if hasattr(grad, "_node") else constant(np.asarray(grad))
    if grad.shape != tuple(arg.shape):
        raise RuntimeError(f"Function {backward} returned an invalid gradient at index {index} "
                           f"- got {list(grad.shape)} but expected shape compatible with "
                           f"{list(arg.shape)}")
    return grad


def _zeros_like(t: Any) -> Any:
    """A zero gradient for tensor ``t``: one broadcast scalar, no array of its size."""
    return expand(constant(np.zeros((), t.dtype)), shape=tuple(t.shape))


def once_differentiable(fn: Any) -> Any:
    """PyTorch's decorator for a ``backward`` that is not itself differentiable; pargraph's
    backward graph records whatever ``backward`` does, so it changes nothing here."""
    return fn
