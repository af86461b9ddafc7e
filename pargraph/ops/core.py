"""The op registry's core: :class:`Primitive`, the ``primitive`` decorator, dtype promotion
as PyTorch does it, and the shape rules the families share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np

from pargraph.capturing import has_symbols, recording
from pargraph.context import context
from pargraph.graph import Node, grad_mode, user_site

REGISTRY: dict[str, Primitive] = {}




def fresh_seed() -> int:
    """A seed drawn from the operating system's entropy (a process's first, ``seed()``'s)."""
    return int(np.random.SeedSequence().entropy % 2**63)


class Defaults:
    """The process's defaults: the floating point dtype (``pargraph.set_default_dtype``: what
    ``tensor(1.5)``, ``zeros(2)`` and a Python float's promotion give) and the random
    generator (``pargraph.manual_seed``: ``rand``, dropout, shuffling, ``uniform_``)."""

    def __init__(self) -> None:
        self.float = np.dtype(np.float32)
        self.reseed(fresh_seed())

    def reseed(self, seed: int) -> np.random.Generator:
        """Start ``generator`` from ``seed``, and keep the seed (``pargraph.initial_seed``):
        drawn per process until ``manual_seed`` sets one."""
        self.generator = np.random.default_rng(seed)
        self.seed = int(seed)
        return self.generator


defaults = context.register("op_defaults", Defaults())


_BOOL, _INT64 = np.dtype(bool), np.dtype(np.int64)
_FLOAT16, _FLOAT32 = np.dtype(np.float16), np.dtype(np.float32)


HALF = np.dtype(np.float16)


class Primitive:
    """A registered op: ``forward`` on numpy values, ``shape`` rule on nodes, vjps on nodes."""

    def __init__(self, name: str, forward: Callable | None, shape: Callable, grad_name=None,
                 view: bool = False, cost: Callable | None = None, method: bool = False,
                 out: bool = False, blas: bool = False, products: Callable | None = None,
                 writes_state: bool = False, refuses: str = ""):
        self.name = name
        #: The dtype kinds PyTorch has no kernel of this op for ("b": bool, "iu": integers),
        #: refused with its NotImplementedError (numpy would compute something).
        self.refuses = refuses
        #: Also a Tensor method and a ``pargraph.<name>`` function of one tensor.
        self.method = method
        self.forward = forward
        self.shape = shape
        #: A view costs nothing in numpy (reshape, permute, expand): partitioning knows it.
        self.view = view
        #: Estimated seconds of a node of this op, from its shapes; None (or a cost that
        #: returns None for the node): by elements touched.
        self.cost = cost
        #: ``forward`` takes ``out=``, an array of the result's shape and dtype to write into
        #: (an elementwise ufunc): the runtime hands it an input that nothing reads afterwards.
        self.out = out
        #: ``forward`` takes ``out=`` too, but its inputs are a step's state and gradients,
        #: which outlive it: runs never look for a dying input to hand it; a compiled step's
        #: replay hands it the array of the state its result replaces (``in_place``).
        self.writes_state = writes_state
        #: ``forward`` calls BLAS or LAPACK (a matrix product, a factorization): its float32
        #: results depend on BLAS's thread count, which a run therefore sets from its graph
        #: (``lowering.blas_threads_of``, ``modes.BlasThreads``).
        self.blas = blas
        #: ``products(node)``: the (m, n, k) of each matrix product ``forward`` hands BLAS, by
        #: the node's shapes; a run whose products are all small leaves BLAS's count alone
        #: (``lowering.blas_threads_of``).
        self.products = products
        self.vjps: tuple[Callable | None, ...] | None = None
        #: ``vjp_of_many(g, out, positions, *inputs, **attrs)``: the contributions to the
        #: inputs at ``positions`` in one call, for ops of any number of inputs (a vjp per
        #: input takes all inputs again: quadratic in their number).
        self.vjp_of_many: Callable | None = None
        #: False for user code (autograd.Function) whose backward may differ call to call:
        #: its backward graph is generated every time, never replayed from a template.
        self.replayable = True
        #: For an op that is not replayable: a template may still hold its node, and calls
        #: its vjp anew at each instantiation (a custom op's backward runs at every backward).
        self.live_vjp = False
        #: For a live op whose vjp reads only its node's structure and ``vjp_context(node)``
        #: (a custom op's backward, as PyTorch requires of ``register_autograd``): that
        #: joins the structure key and the template holds what the vjp made; ``None`` from
        #: it: the vjp is called anew (live).
        self.vjp_context: Callable[[Node], Any] | None = None
        #: A rule recording a cheaper equivalent node in place of a call (ops.rewrites).
        self.rewrite: Callable | None = None
        #: A float-valued elementwise op: integer and boolean inputs are cast to its float
        #: dtype first, as PyTorch computes it (numpy would compute a bool's exp in float16,
        #: or cast a sigmoid back to int).
        self.float_valued = shape in (_elementwise_float, _same_float)
        camel = "".join(part.capitalize() for part in name.split("_"))
        self.grad_name = grad_name or f"{camel}Backward0"

    def defvjp(self, *vjps: Callable | None) -> None:
        """Register one vjp per input (``None`` for inputs without a gradient)."""
        self.vjps = vjps

    def defvjp_at(self, vjp_at: Callable[[int], Callable]) -> None:
        """Register a factory of vjps by input position, for ops with any number of inputs."""
        self.vjps = ()
        self._vjp_at = vjp_at

    def defvjp_of_many(self, vjp_of_many: Callable) -> None:
        """Register the vjp of all needed inputs at once (see ``vjp_of_many``), for ops with
        any number of inputs; the vjp of one input (:meth:`vjp`) is the same function."""
        self.vjp_of_many = vjp_of_many
        self.defvjp_at(lambda k: lambda g, out, *xs, **attrs:
                       vjp_of_many(g, out, [k], *xs, **attrs)[0])

    def vjp(self, position: int) -> Callable | None:
        if self.vjps is None:
            return None
        if not self.vjps:
            return self._vjp_at(position)
        return self.vjps[min(position, len(self.vjps) - 1)]  # the last one serves varargs

    def __call__(self, *inputs: Any, **attrs: Any) -> Node:
        recorder = recording.recorder
        if recorder is not None and (has_symbols(inputs) or has_symbols(attrs)):
            return recorder.symbolic_call(self, inputs, attrs)
        if self.refuses:
            self._check_kind(inputs)
        if self.rewrite is not None:
            replaced = self.rewrite(*inputs, **attrs)
            if replaced is not None:
                return replaced
        try:
            shape, dtype = self.shape(*inputs, **attrs)
        except ShapeError as error:
            raise RuntimeError(f"{self.name}: {error}") from None
        except IndexError as error:  # a dimension out of range, an empty one
            raise IndexError(f"{self.name}(): {error}") from None
        except NotImplementedError as error:  # no kernel for this dtype, as PyTorch's
            raise NotImplementedError(f"{self.name}: {error}") from None
        site = grad_mode.site or user_site()
        if not isinstance(dtype, np.dtype):
            dtype = np.dtype(dtype)
        if self.float_valued:
            for i in inputs:  # a loop, not any(): most calls have float inputs only
                if type(i) is Node and i.dtype.kind in "biu":
                    cast = REGISTRY["cast"]
                    inputs = tuple(cast(j, dtype=dtype) if type(j) is Node and
                                   j.dtype.kind in "biu" else j for j in inputs)
                    break
        node = Node(self, inputs, attrs, shape, dtype, site=site)
        if grad_mode.enabled and self.vjps is not None and (
                dtype.kind == "f" or dtype == BFLOAT16):
            for i in inputs:
                if type(i) is Node and i.requires_grad:
                    node.requires_grad = node.history = True
                    break
        return node

    def _check_kind(self, inputs: tuple) -> None:
        if any(type(i) is Node for i in inputs):
            dtype = result_dtype(*inputs)
            if dtype.kind in self.refuses:
                raise NotImplementedError(f'"{self.name}_cpu" not implemented for '
                                          f"'{torch_name(dtype)}'")

    def __repr__(self) -> str:
        return f"<primitive {self.name}>"


class ShapeError(Exception):
    """Raised by shape rules; the primitive prefixes its name and re-raises RuntimeError."""


def primitive(name: str, shape: Callable, grad_name: str | None = None, view: bool = False,
              cost: Callable | None = None, method: bool = False, out: bool = False,
              blas: bool = False, products: Callable | None = None,
              writes_state: bool = False, refuses: str = ""):
    """Decorator registering ``forward`` as primitive ``name`` (``view``: free in numpy;
    ``cost``: estimated seconds of a node, for partitioning; ``method``: ``x.<name>()`` and
    ``pargraph.<name>(x)`` exist for it; ``out``: ``forward`` takes ``out=``; ``blas``:
    ``forward`` calls BLAS or LAPACK; ``products``: the (m, n, k) of its matrix products;
    ``writes_state``: an optimizer's formula, whose ``forward`` takes ``out=``; ``refuses``:
    the dtype kinds PyTorch has no kernel for)."""

    def register(forward: Callable | None) -> Primitive:
        prim = Primitive(name, forward, shape, grad_name, view, cost, method, out, blas,
                         products, writes_state, refuses)
        REGISTRY[name] = prim
        return prim

    return register


#: Brain floating point (8 exponent bits, 7 of mantissa): numpy has none, ml_dtypes adds it.
BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
#: The 16-bit floats, whose reductions and softmax PyTorch computes in float32 and rounds once.
HALVES = frozenset({HALF, BFLOAT16})
#: PyTorch's names of the dtypes (its ScalarType names, as its messages and ``Tensor.type()``
#: spell them).
TORCH_NAMES = {HALF: "Half", BFLOAT16: "BFloat16", np.dtype(np.float32): "Float",
               np.dtype(np.float64): "Double", np.dtype(np.uint8): "Byte",
               np.dtype(np.int8): "Char", np.dtype(np.int16): "Short",
               np.dtype(np.int32): "Int", np.dtype(np.int64): "Long", np.dtype(np.bool_): "Bool"}


def torch_name(dtype: np.dtype) -> str:
    """PyTorch's name of ``dtype`` (``Long`` for int64), or numpy's for one PyTorch lacks."""
    return TORCH_NAMES.get(np.dtype(dtype), np.dtype(dtype).name)


def is_floating(dtype: np.dtype) -> bool:
    """Whether ``dtype`` is a floating point type (bfloat16 included, whose numpy kind is
    ``V``)."""
    return dtype.kind == "f" or dtype == BFLOAT16


def category(dtype: np.dtype) -> int:
    """0 for bool, 1 for integers, 2 for floating point: the kinds type promotion orders."""
    return 0 if dtype == _BOOL else 2 if dtype.kind in "fc" or dtype == BFLOAT16 else 1


def check_cast(result: np.dtype, target: np.dtype) -> None:
    """Raise PyTorch's error where an in-place op's ``result`` type cannot be written into a
    tensor of ``target`` type: no complex into a real type, no floating point into an
    integer, nothing but bool into bool. Any other pair casts (float64 into float32, int64
    into int32), as ``x.add_(y)`` does in PyTorch."""
    if (result.kind == "c" and target.kind != "c") or category(result) > category(target):
        raise RuntimeError(f"result type {torch_name(result)} can't be cast to the desired "
                           f"output type {torch_name(target)}")


def scalar_dtype(value: Any) -> np.dtype:
    if isinstance(value, bool):
        return _BOOL
    return _INT64 if isinstance(value, int) else defaults.float


def check_fits(value: Any, dtype: np.dtype) -> None:
    """Raise PyTorch's error for an integer (or integer array) that ``dtype`` (an integer
    dtype) cannot hold; numpy would raise an OverflowError of its own, or wrap it around."""
    if dtype.kind not in "iu" or isinstance(value, bool):
        return
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "iu" or not value.size:
            return
        low, high = int(value.min()), int(value.max())
    elif isinstance(value, (int, np.integer)):
        low = high = int(value)
    else:
        return
    limits = np.iinfo(dtype)
    if low < limits.min or high > limits.max:
        raise RuntimeError(f"value cannot be converted to type {dtype} without overflow")


def promote_types(a: np.dtype, b: np.dtype) -> np.dtype:
    """PyTorch's ``promote_types``: within a category numpy's rule; across categories the
    higher category's dtype (``int64`` with ``float32`` is ``float32``, not numpy's float64)."""
    if a == b:
        return a
    rank_a, rank_b = category(a), category(b)
    if rank_a != rank_b:
        return a if rank_a > rank_b else b
    if {a, b} == {BFLOAT16, _FLOAT16}:  # neither holds the other: PyTorch's float32
        return _FLOAT32
    return np.result_type(a, b)


def _promote_all(dtypes: list[np.dtype]) -> np.dtype:
    result = dtypes[0]
    for dtype in dtypes[1:]:
        result = promote_types(result, dtype)
    return result


def result_dtype(*inputs: Any) -> np.dtype:
    """PyTorch's type promotion: dimensioned tensors first, then 0-d tensors and Python
    scalars only when they are of a higher category (bool < integer < float)."""
    common = _common_dtype(inputs)
    if common is not None:
        return common
    groups = (
        [i.dtype for i in inputs if isinstance(i, Node) and i.shape != ()],
        [i.dtype for i in inputs if isinstance(i, Node) and i.shape == ()],
        [scalar_dtype(i) for i in inputs if not isinstance(i, Node)],
    )
    result = None
    for group in groups:
        if not group:
            continue
        candidate = _promote_all(group)
        if result is None:
            result = candidate
        elif category(candidate) > category(result):
            result = candidate if group is not groups[2] else _scalar_dtype_of_category(candidate)
    return result


def _common_dtype(inputs: tuple) -> np.dtype | None:
    """The fast path of promotion: every tensor has one dtype and no scalar outranks it."""
    dtype = None
    for i in inputs:
        if isinstance(i, Node):
            if dtype is None:
                dtype = i.dtype
            elif i.dtype != dtype:
                return None
    if dtype is None:
        return None
    rank = category(dtype)
    for i in inputs:
        if not isinstance(i, Node) and category(scalar_dtype(i)) > rank:
            return None
    return dtype


def _scalar_dtype_of_category(dtype: np.dtype) -> np.dtype:
    return defaults.float if category(dtype) == 2 else _INT64


def float_dtype(dtype: np.dtype) -> np.dtype:
    return dtype if category(dtype) == 2 else defaults.float


def shape_of(x: Any) -> tuple:
    return x.shape if isinstance(x, Node) else ()


def broadcast_shapes(*shapes: tuple) -> tuple:
    if len(shapes) == 2:  # the common cases, without the general loop
        a, b = shapes
        if a == b or not b:
            return tuple(a)
        if not a:
            return tuple(b)
    ndim = max(len(s) for s in shapes)
    padded = [(1,) * (ndim - len(s)) + tuple(s) for s in shapes]
    out = []
    for axis, sizes in enumerate(zip(*padded)):
        wanted = {n for n in sizes if n != 1}
        if len(wanted) > 1:
            listed = " and ".join(str(tuple(s)) for s in shapes)
            raise ShapeError(
                f"shapes {listed} cannot be broadcast together "
                f"(sizes {' vs '.join(map(str, sizes))} at dimension {axis})"
            )
        out.append(wanted.pop() if wanted else 1)
    return tuple(out)


def keyword_sizes(given: dict, name: str, args: tuple, op: str) -> tuple:
    """A shape or dims given by PyTorch's keyword (``x.view(size=(2, 3))``) where they are
    usually varargs (``x.view(2, 3)``): as the varargs, with Python's errors otherwise."""
    unexpected = [key for key in given if key != name]
    if unexpected:
        raise TypeError(f"{op}() got an unexpected keyword argument '{unexpected[0]}'")
    if args:
        raise TypeError(f"{op}() got multiple values for argument '{name}'")
    return (given[name],)


def normalize_dim(dim: int, ndim: int) -> int:
    low, high = (-ndim, ndim - 1) if ndim else (-1, 0)
    if not low <= dim <= high:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{low}, {high}], but got {dim})"
        )
    return dim % ndim if ndim else 0


def normalize_dims(dim: Any, ndim: int) -> tuple[int, ...]:
    """``None`` means all dimensions; an int or a sequence of ints otherwise."""
    if dim is None:
        return tuple(range(ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    normalized = [normalize_dim(d, ndim) for d in dims]
    if len(set(normalized)) != len(normalized):
        twice = next(d for d in normalized if normalized.count(d) > 1)
        raise RuntimeError(f"dim {twice} appears multiple times in the list of dims")
    return tuple(sorted(normalized))


def _reduced_shape(shape: tuple, dims: tuple, keepdim: bool) -> tuple:
    if keepdim:
        return tuple(1 if i in dims else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in dims)


def _elementwise(*inputs: Any) -> tuple[tuple, np.dtype]:
    if len(inputs) == 2:  # the common cases, without the general rules: the same for them
        a, b = inputs
        if type(b) is Node and type(a) is not Node:
            a, b = b, a
        if type(a) is Node:
            if type(b) is Node:
                if a.shape == b.shape and a.dtype == b.dtype:
                    return a.shape, a.dtype
            elif type(b) in (float, int) and a.dtype.kind in "fc":  # a weak scalar
                return a.shape, a.dtype
    return broadcast_shapes(*(shape_of(i) for i in inputs)), result_dtype(*inputs)


def _elementwise_float(*inputs: Any) -> tuple[tuple, np.dtype]:
    shape, dtype = _elementwise(*inputs)
    return shape, float_dtype(dtype)


def _same(x: Node, **attrs: Any) -> tuple[tuple, np.dtype]:
    return x.shape, x.dtype


def _same_float(x: Node) -> tuple[tuple, np.dtype]:
    return x.shape, float_dtype(x.dtype)


def _compare(x: Any, y: Any) -> tuple[tuple, np.dtype]:
    return broadcast_shapes(shape_of(x), shape_of(y)), _BOOL


def _reduction(x: Node, dim=None, keepdim=False) -> tuple[tuple, np.dtype]:
    dtype = x.dtype if category(x.dtype) == 2 else _INT64
    return _reduced_shape(x.shape, dim, keepdim), dtype


def _reduction_same(x: Node, dim=None, keepdim=False) -> tuple[tuple, np.dtype]:
    if any(x.shape[d] == 0 for d in dim):
        raise ShapeError(f"cannot reduce over an empty dimension of shape {x.shape}")
    return _reduced_shape(x.shape, dim, keepdim), x.dtype


def _gradient_shape(g, result, **attrs):
    if g.shape != result.shape:
        raise ShapeError(f"gradient of shape {g.shape} for a result of shape {result.shape}")
    return g.shape, g.dtype
