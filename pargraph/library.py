"""Custom ops with PyTorch's ``torch.library`` API: any numpy, scipy or C function as a node.

``@pargraph.library.custom_op("mylib::name", mutates_args=())`` makes a function one node
of the graph: it runs inside a task, on pargraph's threads or on a cluster worker, side by side
with other independent work. Inside the task the function receives read-only numpy arrays for
its tensor arguments (:class:`OpArray`, which also answers ``x.cpu().numpy()``, ``x.device``,
``x.to(...)`` and ``x.clone()`` as PyTorch's tensors do; other arguments as they were passed)
and returns one array or tensor. Calling the op records the node without running it, so the
output's shape and dtype come from the function given to ``register_fake`` (it receives the
lazy tensors and returns a tensor of the output's shape and dtype, e.g.
``pargraph.empty_like(x)``); without one, a call runs the function right away on its computed
inputs, as eager PyTorch would. ``register_autograd(backward,
setup_context=)`` gives it a gradient, written with tensor ops or other custom ops (without
it, a backward through the op raises, as PyTorch's does); the function must return numbers
(``None`` or strings are an error naming the op, not a NaN). As PyTorch requires, the
backward reads only what ``setup_context`` put in ``ctx``: it is called once per structure
and ctx values, what it records replayed after (a ctx holding an object, or a tensor that is
neither an input nor the output, makes it run at every backward). ``cost=``
(seconds per call, or a function of the tensor arguments' shapes) tells the partitioner what
a call takes: without it, a call is estimated from the elements it touches.

The op's name names its tasks in traces and the dashboard, and its errors name it and the
user's line that called it. The function travels to cluster workers with the task (one
defined in ``__main__`` too, by value).
"""

from __future__ import annotations

import functools
import inspect
import math
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pargraph import dtypes
from pargraph._tensor import Tensor
from pargraph.autograd.function import FunctionCtx, gradient_node
from pargraph.autograd.mode import no_grad
from pargraph.capturing import has_symbols
from pargraph.devices import device
from pargraph.engine import execution
from pargraph.graph import Node, grad_mode
from pargraph.ops import Primitive, defaults
from pargraph.remote.recovery import fetch

#: Argument signatures whose fake results an op keeps (then it forgets them all).
FAKED_SHAPES = 256

def custom_op(name: str, fn: Callable | None = None, /, *, mutates_args: Any = (),
              device_types: Any = None, schema: Any = None,
              cost: float | Callable[..., float] | None = None) -> Any:
    """Make ``fn`` (numpy arrays in, one numpy array out) an op of the graph named ``name``.

    Examples
    --------
    >>> import numpy as np, pargraph
    >>> @pargraph.library.custom_op("demo::numpy_sin", mutates_args=())
    ... def numpy_sin(x):
    ...     return np.sin(x)
    >>> @numpy_sin.register_fake
    ... def _(x):
    ...     return pargraph.empty_like(x)
    >>> numpy_sin.register_autograd(lambda ctx, g: g * ctx.saved_tensors[0].cos(),
    ...                             setup_context=lambda ctx, inputs, output:
    ...                             ctx.save_for_backward(inputs[0]))
    >>> x = pargraph.tensor([0.0, 1.0], requires_grad=True)
    >>> numpy_sin(x).sum().backward(); x.grad
    tensor([1.0000, 0.5403])
    """
    if fn is None:
        return functools.partial(custom_op, name, mutates_args=mutates_args,
                                 device_types=device_types, schema=schema, cost=cost)
    return CustomOp(name, fn, mutates_args, cost)


class CustomOp:
    """What :func:`custom_op` returns: call it like the function, on tensors."""

    def __init__(self, name: str, fn: Callable, mutates_args: Any,
                 cost: float | Callable[..., float] | None) -> None:
        if not isinstance(name, str) or "::" not in name:
            raise ValueError(f"custom_op: the name must be 'namespace::name', got {name!r}")
        if mutates_args not in ((), [], None) and not (
                isinstance(mutates_args, (tuple, list)) and not mutates_args):
            raise NotImplementedError(
                f"custom_op {name}: mutates_args={mutates_args!r}: pargraph's values never "
                "change in place; return the new value instead (mutates_args=())")
        self.name, self._fn = name, fn
        self._signature = inspect.signature(fn)
        #: How many arguments a call passes positionally with nothing to bind (all the
        #: function's parameters, none with a default), or -1.
        self._plain = len(self._signature.parameters) if all(
            p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
            for p in self._signature.parameters.values()) else -1
        self._fake: Callable | None = None
        #: The fake's (shape, dtype) by the arguments' shapes, dtypes and other values.
        self._faked: dict = {}
        self._backward: Callable | None = None
        self._setup_context: Callable | None = None
        functools.update_wrapper(self, fn)
        self._primitive = Primitive(name, functools.partial(_run, fn, name), _declared_shape,
                                    grad_name=f"{name.split('::')[-1].title()}Backward",
                                    cost=_cost_of(cost))
        # PyTorch requires register_autograd's backward to read only what ctx holds (it
        # must trace on fake tensors): a template keyed by the ctx's values holds what it
        # made; a ctx holding anything else makes it live, called at every backward.
        self._primitive.replayable = False
        self._primitive.live_vjp = True
        self._primitive.vjp_context = _context_structure
        # As in PyTorch, the result of a call on tensors that require grad requires grad, and
        # a backward through it raises until register_autograd gives it a formula.
        self._primitive.defvjp_at(self._vjp_at)
        _ops[name] = self

    def register_fake(self, fake: Callable) -> Callable:
        """``fake(*args)`` returns a tensor of the output's shape and dtype, from the lazy
        input tensors (``pargraph.empty_like(x)``, ``x.new_zeros(...)``); a decorator. As
        PyTorch's, it may read only the tensors' shapes and dtypes and the other arguments:
        it is asked once per such signature, and its answer kept."""
        self._fake = fake
        self._faked = {}
        return fake

    def register_autograd(self, backward: Callable, /, *,
                          setup_context: Callable | None = None) -> None:
        """``setup_context(ctx, inputs, output)`` saves what ``backward(ctx, grad)`` needs;
        ``backward`` returns one gradient per argument (None for the others)."""
        self._backward, self._setup_context = backward, setup_context
        self._primitive.defvjp_at(self._vjp_at)

    def _arguments(self, args: tuple, kwargs: dict) -> tuple:
        """The call's arguments in the function's order, defaults filled in."""
        if not kwargs and len(args) == self._plain:
            return args
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as error:
            raise TypeError(f"{self.name}: {error}") from None
        bound.apply_defaults()
        return tuple(bound.arguments.values())

    def __call__(self, *args: Any, **kwargs: Any) -> Tensor:
        values = self._arguments(args, kwargs)
        inputs = tuple(v._node if isinstance(v, Tensor) else v for v in values)
        if self._fake is not None:
            shape, dtype = self._faked_shape(values, inputs)
            node = self._primitive(*inputs, _shape=shape, _dtype=dtype)
        else:  # no fake: computed now, on its computed inputs, as eager PyTorch would
            arrays = [fetch(_realized(v._node)) if isinstance(v, Tensor) else v
                      for v in values]
            with np.errstate(all="ignore"):
                value = self._fn(*_op_arguments(arrays))
            if isinstance(value, tuple):
                raise TypeError(f"{self.name}: returned a tuple; a custom op returns one array "
                                "(ops with several outputs are not supported yet)")
            try:
                value = _numbers(value)
            except TypeError as error:
                raise TypeError(f"{self.name}: {error}") from None
            node = self._primitive(*inputs, _shape=value.shape, _dtype=value.dtype)
            node.value = value
        output = Tensor(node)
        if node.history:
            ctx = FunctionCtx(tuple(isinstance(v, Tensor) and v.requires_grad
                                    and grad_mode.enabled for v in values))
            ctx._args = values
            if self._setup_context is not None:
                with no_grad():
                    self._setup_context(ctx, values, output)
            node.context = ctx
        return output

    def _faked_shape(self, values: tuple, inputs: tuple) -> tuple:
        """The output's shape and dtype from the fake, which is asked once per shapes,
        dtypes and other arguments (it may only read those, as PyTorch's fakes) and default
        dtype (a factory in it may use that)."""
        if has_symbols(inputs):  # a number a compiled step binds anew at each call: the
            key = known = None  # key would hash it, as if Python had decided with its value
        else:
            try:
                key = (defaults.float, *((i.shape, i.dtype) if isinstance(i, Node)
                                         else (type(i), i) for i in inputs))
                known = self._faked.get(key)
            except TypeError:  # an argument that is not hashable: asked every time
                key = known = None
        if known is not None:
            return known
        with no_grad():
            shaped = self._fake(*values)
        if not isinstance(shaped, Tensor):
            raise TypeError(f"{self.name}: register_fake's function returned "
                            f"{type(shaped).__name__}, expected a tensor of the output's "
                            "shape and dtype")
        known = (tuple(shaped.shape), np.dtype(shaped.dtype))
        if key is not None:
            if len(self._faked) >= FAKED_SHAPES:
                self._faked.clear()
            self._faked[key] = known
        return known

    def _vjp_at(self, position: int) -> Callable:
        def vjp(g: Node, out: Node, *inputs: Any, **attrs: Any) -> Node:
            return self._input_grads(out.context, g)[position]
        return vjp

    def _input_grads(self, ctx: FunctionCtx, g: Node) -> tuple:
        """The gradient node of each argument, from one call of the user's backward per
        output gradient (cached: the vjp is asked once per input)."""
        if ctx._cache is not None and ctx._cache[0] is g:
            return ctx._cache[1]
        if self._backward is None:
            raise RuntimeError(f"Trying to backward through {self.name} but no autograd "
                               "formula was registered. Please use register_autograd to add "
                               "one.")
        returned = self._backward(ctx, Tensor._wrap(g))
        returned = returned if isinstance(returned, tuple) else (returned,)
        if len(returned) != len(ctx._args):
            raise RuntimeError(f"{self.name}: backward returned {len(returned)} gradients, "
                               f"expected one per argument ({len(ctx._args)})")
        grads = [gradient_node(arg, grad, k, f"{self.name} backward")
                 if isinstance(arg, Tensor) else None
                 for k, (arg, grad) in enumerate(zip(ctx._args, returned))]
        ctx._cache = (g, tuple(grads))
        return ctx._cache[1]

    def __repr__(self) -> str:
        return f"<custom op {self.name}>"


class OpArray(np.ndarray):
    """The numpy array a custom op's function receives for a tensor argument, which also
    answers what PyTorch's custom ops call on theirs (``x.cpu().numpy()``,
    ``x.numpy(force=True)``, ``x.detach()``, ``x.device``, ``x.to(...)``), so a function
    written for PyTorch runs unchanged.

    Examples
    --------
    >>> import numpy as np
    >>> from pargraph.library import OpArray
    >>> x = np.arange(3.0).view(OpArray)
    >>> type(x.cpu().numpy(force=True)).__name__, str(x.device)
    ('ndarray', 'cpu')
    """

    def numpy(self, force: bool = False) -> np.ndarray:
        return self.view(np.ndarray)

    def cpu(self) -> OpArray:
        return self

    def detach(self) -> OpArray:
        return self

    def contiguous(self) -> OpArray:
        return self

    def clone(self) -> OpArray:
        return self.copy()

    @property
    def device(self) -> device:
        return device("cpu")

    def to(self, *args: Any, **kwargs: Any) -> OpArray:
        """The array itself, or a copy of another dtype (``x.to(x.device, np.float64)``)."""
        dtype = kwargs.get("dtype")
        for arg in args:
            if isinstance(arg, (np.dtype, dtypes.dtype)) or (isinstance(arg, type) and
                                                             issubclass(arg, np.generic)):
                dtype = arg
        return self if dtype is None or np.dtype(dtype) == self.dtype else self.astype(dtype)


def _op_arguments(args: Any, read_only: bool = True) -> list:
    """The arguments a custom op's function receives: each array a read-only
    :class:`OpArray` view, since the values are the graph's (a parameter's, another node's)
    and the op declares that it changes none (``mutates_args=()``); writing into one raises.
    ``read_only=False``: writable views (:func:`opcheck` sees a change, on copies)."""
    viewed = []
    for a in args:
        if type(a) is np.ndarray:
            a = a.view(OpArray)
            a.flags.writeable = not read_only
        viewed.append(a)
    return viewed


def _run(fn: Callable, name: str, *args: Any, _shape: tuple, _dtype: np.dtype) -> np.ndarray:
    """A custom op's forward inside its task: the user's function, checked against the shape
    and dtype its fake declared (a module-level function: it pickles to workers)."""
    value = fn(*_op_arguments(args))
    if isinstance(value, tuple):
        raise TypeError("a custom op returns one array (ops with several outputs are not "
                        "supported yet)")
    value = _numbers(value, _dtype)
    if value.shape != _shape:
        raise RuntimeError(f"returned shape {list(value.shape)}, but its fake declared "
                           f"{list(_shape)}")
    return value if value.dtype == _dtype else value.astype(_dtype)


def _numbers(value: Any, dtype: np.dtype | None = None) -> np.ndarray:
    """What a custom op's function returned, as an array; an error for what holds no numbers
    (``None``, strings, objects), which a cast would turn into NaN or garbage. ``dtype``: the
    one its fake declared, for the message."""
    array = np.asarray(value)
    if array.dtype.kind in "OSU":
        raise TypeError(f"returned {type(value).__name__} ({array.dtype}), expected an array "
                        f"of numbers{f' ({dtype})' if dtype is not None else ''}")
    return array


def _context_structure(node: Node) -> tuple | None:
    return node.context.structure(node)


def _declared_shape(*inputs: Any, _shape: tuple, _dtype: np.dtype) -> tuple:
    return _shape, _dtype


def _cost_of(cost: float | Callable[..., float] | None) -> Callable | None:
    """The primitive's cost (seconds of a node) from the user's: a number, or a function of
    the tensor arguments' shapes."""
    if cost is None:
        return None
    if callable(cost):
        return lambda node: float(cost(*[i.shape for i in node.inputs if isinstance(i, Node)]))
    seconds = float(cost)
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"custom_op: cost must be seconds >= 0, got {cost!r}")
    return lambda node: seconds


def _realized(node: Node) -> Node:
    if node.value is None:
        execution.realize([node])
    return node


def register_fake(op: CustomOp | str, fn: Callable | None = None) -> Any:
    """``torch.library.register_fake``: ``op.register_fake`` by the op or its name."""
    found = _find(op)
    return found.register_fake if fn is None else found.register_fake(fn)


def register_autograd(op: CustomOp | str, backward: Callable, /, *,
                      setup_context: Callable | None = None) -> None:
    """``torch.library.register_autograd``: ``op.register_autograd`` by the op or its name."""
    _find(op).register_autograd(backward, setup_context=setup_context)


#: What :func:`opcheck` tests, in PyTorch's names.
OPCHECK_TESTS = ("test_schema", "test_autograd_registration", "test_faketensor",
                 "test_aot_dispatch_dynamic")


class OpCheckError(Exception):
    """A test of :func:`opcheck` failed."""


def opcheck(op: CustomOp | str, args: tuple, kwargs: dict | None = None, *,
            test_utils: str | Sequence[str] = OPCHECK_TESTS, raise_exception: bool = True,
            atol: float | None = None, rtol: float | None = None) -> dict[str, Any]:
    """``torch.library.opcheck``: test that a custom op keeps what its registration says, on
    sample arguments. ``test_schema``: the function changes no argument and returns a new
    array (not an argument, nor a view of one); ``test_autograd_registration``: gradients go
    through the op's own path (``register_autograd``); ``test_faketensor``: the
    fake gives the shape and dtype the function returns; ``test_aot_dispatch_dynamic``: the
    op inside :func:`pargraph.compile` gives the results (and gradients) of an eager call.
    Returns ``{test: "SUCCESS"}``, or the error in place of ``"SUCCESS"`` with
    ``raise_exception=False``; else the first failure raises :class:`OpCheckError`.

    Examples
    --------
    >>> import numpy as np, pargraph
    >>> @pargraph.library.custom_op("demo::twice", mutates_args=())
    ... def twice(x):
    ...     return x * 2
    >>> twice.register_fake(lambda x: pargraph.empty_like(x))
    <function <lambda> at ...>
    >>> pargraph.library.opcheck(twice, (pargraph.ones(3),))["test_faketensor"]
    'SUCCESS'
    """
    if (rtol is None) != (atol is None):
        raise ValueError("opcheck(op, ...): if you specify one of rtol/atol, you must specify "
                         "both")
    found = _find(op)
    tests = (test_utils,) if isinstance(test_utils, str) else tuple(test_utils)
    if not set(tests) <= set(OPCHECK_TESTS):
        raise ValueError(f"opcheck(op, ..., test_utils={test_utils!r}), expected test_utils to "
                         f"be a subset of {OPCHECK_TESTS} but it was not")
    values = found._arguments(tuple(args), kwargs or {})
    results: dict[str, Any] = {}
    for test in tests:
        try:
            _OPCHECKS[test](found, values, atol, rtol)
            results[test] = "SUCCESS"
        except Exception as error:
            if raise_exception:
                raise OpCheckError(f"opcheck(op, ...): {test} failed with {error}") from error
            results[test] = error
    return results


def _called_directly(op: CustomOp, values: tuple) -> tuple[list, np.ndarray]:
    """The op's function on copies of the arguments' values: (those copies, its result)."""
    arrays = [np.array(v.detach().numpy()) if isinstance(v, Tensor) else v for v in values]
    with np.errstate(all="ignore"):  # writable copies: a change is seen, not refused
        returned = op._fn(*_op_arguments(arrays, read_only=False))
    return arrays, _numbers(returned)


def _check_schema(op: CustomOp, values: tuple, atol: Any, rtol: Any) -> None:
    arrays, result = _called_directly(op, values)
    for k, (array, value) in enumerate(zip(arrays, values)):
        if isinstance(value, Tensor) and not np.array_equal(array, value.detach().numpy(),
                                                            equal_nan=array.dtype.kind in "fc"):
            raise RuntimeError(f"{op.name}: argument {k} was changed in place, but "
                               "mutates_args=() says that no argument is")
        if isinstance(array, np.ndarray) and np.may_share_memory(result, array):
            raise RuntimeError(f"{op.name}: the result is argument {k} or a view of it; a custom "
                               "op returns a new array")


def _check_autograd_registration(op: CustomOp, values: tuple, atol: Any, rtol: Any) -> None:
    # As for PyTorch's custom_op ops, the gradient goes through the op's own autograd path,
    # which raises PyTorch's error until register_autograd gives it a formula (a backward
    # without one fails test_aot_dispatch_dynamic, as in PyTorch).
    if op._primitive.vjp(0) is None:
        raise RuntimeError(f"{op.name}: its autograd path was replaced")


def _check_faketensor(op: CustomOp, values: tuple, atol: Any, rtol: Any) -> None:
    if op._fake is None:
        raise RuntimeError(f"{op.name} has no fake: use register_fake")
    with no_grad():
        shaped = op._fake(*values)
    _, result = _called_directly(op, values)
    faked = (tuple(shaped.shape), np.dtype(shaped.dtype))
    if faked != (result.shape, result.dtype):
        raise RuntimeError(f"{op.name}: the fake gives shape {list(faked[0])} and dtype "
                           f"{faked[1]}, the function returns shape {list(result.shape)} and "
                           f"dtype {result.dtype}")


def _check_aot_dispatch_dynamic(op: CustomOp, values: tuple, atol: Any, rtol: Any) -> None:
    from pargraph.autograd.functional import grad
    from pargraph.compiler import compile as compiled
    from pargraph.testing import assert_close

    positions = [k for k, v in enumerate(values) if isinstance(v, Tensor) and v.requires_grad
                 and grad_mode.enabled]

    def call(*tensors: Any) -> tuple:
        arguments = list(values)
        for k, tensor in zip(positions, tensors):
            arguments[k] = tensor
        out = op(*arguments)
        if not positions or not out.requires_grad:
            return (out,)
        return (out, *grad(out.sum(), [arguments[k] for k in positions], allow_unused=True))

    leaves = [values[k].detach().requires_grad_() for k in positions]
    eager = call(*leaves)
    again = compiled(call, fullgraph=True)(*leaves)
    assert_close([t.detach() if t is not None else t for t in again],
                 [t.detach() if t is not None else t for t in eager], atol=atol, rtol=rtol)


_OPCHECKS = {"test_schema": _check_schema,
             "test_autograd_registration": _check_autograd_registration,
             "test_faketensor": _check_faketensor,
             "test_aot_dispatch_dynamic": _check_aot_dispatch_dynamic}


_ops: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def _find(op: CustomOp | str) -> CustomOp:
    if isinstance(op, CustomOp):
        return op
    found = _ops.get(op)
    if found is None:
        raise ValueError(f"no custom op named {op!r}: define it with "
                         "pargraph.library.custom_op first")
    return found
