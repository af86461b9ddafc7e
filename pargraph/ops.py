"""The op registry: every primitive declared once, in one block.

A primitive has a numpy ``forward``, a ``shape`` rule that infers the output shape and dtype
(and raises a clear error for bad input at the call that builds the node), and one
vector-Jacobian product per differentiable input, written in pargraph ops so that the backward
graph is made of ordinary nodes. Calling a primitive records a :class:`~pargraph.graph.Node`;
nothing is computed. vjps take ``(g, out, *inputs, **attrs)``: ``g`` is the incoming gradient,
``out`` the forward node.

Composite ops (mean, var, logsumexp, ...) at the end of this module are compositions of
primitives and need no rule of their own. Every node costs the same serial Python whatever its
work, so what a training step records often (softmax, log_softmax, stack and their backwards)
is a primitive there, beside the composite that fronts it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from pargraph.capturing import has_symbols, recording
from pargraph.graph import Node, grad_mode, user_site

REGISTRY: dict[str, Primitive] = {}
DEFAULT_FLOAT = np.dtype(np.float32)
_BOOL, _INT64 = np.dtype(bool), np.dtype(np.int64)
HALF = np.dtype(np.float16)  # PyTorch accumulates its reductions in float32


class Primitive:
    """A registered op: ``forward`` on numpy values, ``shape`` rule on nodes, vjps on nodes."""

    def __init__(self, name: str, forward: Callable | None, shape: Callable, grad_name=None,
                 view: bool = False, cost: Callable | None = None, method: bool = False,
                 out: bool = False):
        self.name = name
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
        self.vjps: tuple[Callable | None, ...] | None = None
        #: ``vjp_of_many(g, out, positions, *inputs, **attrs)``: the contributions to the
        #: inputs at ``positions`` in one call, for ops of any number of inputs (a vjp per
        #: input takes all inputs again: quadratic in their number).
        self.vjp_of_many: Callable | None = None
        #: False for user code (autograd.Function) whose backward may differ call to call:
        #: its backward graph is generated every time, never replayed from a template.
        self.replayable = True
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
        try:
            shape, dtype = self.shape(*inputs, **attrs)
        except ShapeError as error:
            raise RuntimeError(f"{self.name}: {error}") from None
        site = grad_mode.site or user_site()
        if not isinstance(dtype, np.dtype):
            dtype = np.dtype(dtype)
        node = Node(self, inputs, attrs, shape, dtype, site=site)
        if grad_mode.enabled and self.vjps is not None and dtype.kind == "f":
            for i in inputs:
                if type(i) is Node and i.requires_grad:
                    node.requires_grad = node.history = True
                    break
        return node

    def __repr__(self) -> str:
        return f"<primitive {self.name}>"


class ShapeError(Exception):
    """Raised by shape rules; the primitive prefixes its name and re-raises RuntimeError."""


def primitive(name: str, shape: Callable, grad_name: str | None = None, view: bool = False,
              cost: Callable | None = None, method: bool = False, out: bool = False):
    """Decorator registering ``forward`` as primitive ``name`` (``view``: free in numpy;
    ``cost``: estimated seconds of a node, for partitioning; ``method``: ``x.<name>()`` and
    ``pargraph.<name>(x)`` exist for it; ``out``: ``forward`` takes ``out=``)."""

    def register(forward: Callable | None) -> Primitive:
        prim = Primitive(name, forward, shape, grad_name, view, cost, method, out)
        REGISTRY[name] = prim
        return prim

    return register


# --- dtype and shape helpers --------------------------------------------------------------

def _category(dtype: np.dtype) -> int:
    return 0 if dtype == _BOOL else 2 if dtype.kind in "fc" else 1


def _scalar_dtype(value: Any) -> np.dtype:
    if isinstance(value, bool):
        return _BOOL
    return _INT64 if isinstance(value, int) else DEFAULT_FLOAT


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
    rank_a, rank_b = _category(a), _category(b)
    if rank_a != rank_b:
        return a if rank_a > rank_b else b
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
        [_scalar_dtype(i) for i in inputs if not isinstance(i, Node)],
    )
    result = None
    for group in groups:
        if not group:
            continue
        candidate = _promote_all(group)
        if result is None:
            result = candidate
        elif _category(candidate) > _category(result):
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
    rank = _category(dtype)
    for i in inputs:
        if not isinstance(i, Node) and _category(_scalar_dtype(i)) > rank:
            return None
    return dtype


def _scalar_dtype_of_category(dtype: np.dtype) -> np.dtype:
    return DEFAULT_FLOAT if _category(dtype) == 2 else _INT64


def float_dtype(dtype: np.dtype) -> np.dtype:
    return dtype if _category(dtype) == 2 else DEFAULT_FLOAT


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
    return tuple(sorted({normalize_dim(d, ndim) for d in dims}))


def _reduced_shape(shape: tuple, dims: tuple, keepdim: bool) -> tuple:
    if keepdim:
        return tuple(1 if i in dims else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in dims)


def _elementwise(*inputs: Any) -> tuple[tuple, np.dtype]:
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
    dtype = x.dtype if _category(x.dtype) == 2 else _INT64
    return _reduced_shape(x.shape, dim, keepdim), dtype


def _reduction_same(x: Node, dim=None, keepdim=False) -> tuple[tuple, np.dtype]:
    if any(x.shape[d] == 0 for d in dim):
        raise ShapeError(f"cannot reduce over an empty dimension of shape {x.shape}")
    return _reduced_shape(x.shape, dim, keepdim), x.dtype


def unbroadcast(g: Node, shape: tuple) -> Node:
    """Sum ``g`` down to ``shape``: the vjp of numpy broadcasting."""
    if g.shape == shape:
        return g
    lead = len(g.shape) - len(shape)
    kept = tuple(lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1)
    if not kept:  # only leading dimensions go: one sum does it
        return sum_(g, dim=tuple(range(lead)), keepdim=False)
    return reshape(sum_(g, dim=tuple(range(lead)) + kept, keepdim=True), shape=shape)


def reshaped(x: Node, shape: tuple) -> Node:
    """``x`` with ``shape``: no node at all when it already has it (for vjps)."""
    return x if x.shape == tuple(shape) else reshape(x, shape=tuple(shape))


def swap_last(x: Node) -> Node:
    """``x`` with its last two dimensions swapped, for vjps: the transpose of a transpose is
    the original node, not a second permute."""
    if x.op is permute and x.inputs:  # a realized node may have had its inputs cut
        dims = x.attrs["dims"]
        combined = dims[:-2] + (dims[-1], dims[-2])
        if combined == tuple(range(len(combined))):
            return x.inputs[0]
    return transpose(x, -2, -1)


# --- leaves and identity --------------------------------------------------------------------

leaf = Primitive("leaf", None, _same)  # a value given, not computed: a tensor from data
REGISTRY["leaf"] = leaf


def constant(value: Any, requires_grad: bool = False, shape: tuple | None = None,
             dtype: np.dtype | None = None) -> Node:
    """A leaf node holding ``value`` (already realized: an array, or a cluster Future, which
    then needs ``shape`` and ``dtype``)."""
    shape = value.shape if shape is None else shape
    dtype = value.dtype if dtype is None else dtype
    node = Node(leaf, (), {}, shape, dtype, value=value, site=user_site())
    node.requires_grad = requires_grad
    return node


@primitive("stop_gradient", _same, view=True)
def stop_gradient(x):
    return x
# No vjp: the same value with no history. What detach() records for a not-yet-realized value,
# and the shift of a stable softmax (its gradient terms cancel).


@primitive("cast", lambda x, dtype: (x.shape, dtype), grad_name="ToCopyBackward0")
def cast(x, dtype):
    return x.astype(dtype)
cast.defvjp(lambda g, out, x, dtype: cast(g, dtype=x.dtype))


@primitive("clone", _same)
def clone(x):
    return np.array(x, copy=True)
clone.defvjp(lambda g, out, x: g)


# --- elementwise arithmetic -----------------------------------------------------------------

@primitive("neg", _same, out=True)
def neg(x, out=None):
    return np.negative(x, out=out)
neg.defvjp(lambda g, out, x: neg(g))


@primitive("add", _elementwise, out=True)
def add(x, y, out=None):
    return np.add(x, y, out=out)
add.defvjp(
    lambda g, out, x, y: unbroadcast(g, x.shape),
    lambda g, out, x, y: unbroadcast(g, y.shape),
)


@primitive("sub", _elementwise, out=True)
def sub(x, y, out=None):
    return np.subtract(x, y, out=out)
sub.defvjp(
    lambda g, out, x, y: unbroadcast(g, x.shape),
    lambda g, out, x, y: unbroadcast(neg(g), y.shape),
)


@primitive("mul", _elementwise, out=True)
def mul(x, y, out=None):
    return np.multiply(x, y, out=out)
mul.defvjp(
    lambda g, out, x, y: unbroadcast(mul(g, y), x.shape),
    lambda g, out, x, y: unbroadcast(mul(g, x), y.shape),
)


@primitive("div", _elementwise_float, out=True)
def div(x, y, out=None):
    return np.true_divide(x, y, out=out)
div.defvjp(
    lambda g, out, x, y: unbroadcast(div(g, y), x.shape),
    lambda g, out, x, y: unbroadcast(neg(div(mul(g, out), y)), y.shape),
)


@primitive("pow", _elementwise)
def pow_(x, y):
    return np.power(x, y)


def _pow_vjp_exponent(g, out, x, y):
    """d/dy x**y = x**y log x; PyTorch's convention: 0 where x == 0 (instead of nan)."""
    if not isinstance(x, Node):
        return unbroadcast(mul(g, mul(out, math.log(x))) if x != 0 else mul(g, 0.0), y.shape)
    return unbroadcast(where(eq(x, 0), 0.0, mul(g, mul(out, log(x)))), y.shape)


def _minus_one(y: Any) -> Any:
    return sub(y, 1) if isinstance(y, Node) else y - 1


pow_.defvjp(
    lambda g, out, x, y: unbroadcast(mul(g, mul(y, pow_(x, _minus_one(y)))), x.shape),
    _pow_vjp_exponent,
)


@primitive("add_n", lambda *xs: _elementwise(*xs), grad_name="AddBackward0")
def add_n(*xs):
    total = np.add(xs[0], xs[1])  # a fresh array: later terms may be added in place
    for x in xs[2:]:
        in_place = (type(total) is np.ndarray and np.ndim(x) > 0
                    and np.shape(x) == total.shape[-np.ndim(x):]
                    and np.result_type(total, x) == total.dtype)
        total = np.add(total, x, out=total if in_place else None)
    return total
add_n.defvjp_of_many(lambda g, out, positions, *xs: [unbroadcast(g, xs[k].shape)
                                                     for k in positions])


def _share_ties(g, out, x, y, wins):
    """Gradient of maximum/minimum for x: all of g where x wins, half of it at ties."""
    share = add(wins(x, y), mul(eq(x, y), 0.5))
    return unbroadcast(mul(g, share), x.shape)


@primitive("maximum", _elementwise, out=True)
def maximum(x, y, out=None):
    return np.maximum(x, y, out=out)
maximum.defvjp(
    lambda g, out, x, y: _share_ties(g, out, x, y, gt),
    lambda g, out, x, y: _share_ties(g, out, y, x, gt),
)


@primitive("minimum", _elementwise, out=True)
def minimum(x, y, out=None):
    return np.minimum(x, y, out=out)
minimum.defvjp(
    lambda g, out, x, y: _share_ties(g, out, x, y, lt),
    lambda g, out, x, y: _share_ties(g, out, y, x, lt),
)


def _where_shape(cond, x, y):
    if isinstance(cond, Node) and cond.dtype != _BOOL:
        raise ShapeError(f"condition must be a bool tensor, got {cond.dtype}")
    return broadcast_shapes(shape_of(cond), shape_of(x), shape_of(y)), result_dtype(x, y)


@primitive("where", _where_shape)
def where(cond, x, y):
    return np.where(cond, x, y)
where.defvjp(
    None,
    lambda g, out, cond, x, y: unbroadcast(where(cond, g, 0.0), x.shape),
    lambda g, out, cond, x, y: unbroadcast(where(cond, 0.0, g), y.shape),
)


# --- elementwise math -----------------------------------------------------------------------

@primitive("exp", _same_float, method=True, out=True)
def exp(x, out=None):
    return np.exp(x, out=out)
exp.defvjp(lambda g, out, x: mul(g, out))


@primitive("log", _same_float, method=True, out=True)
def log(x, out=None):
    return np.log(x, out=out)
log.defvjp(lambda g, out, x: div(g, x))


@primitive("sqrt", _same_float, method=True, out=True)
def sqrt(x, out=None):
    return np.sqrt(x, out=out)
sqrt.defvjp(lambda g, out, x: div(mul(g, 0.5), out))


@primitive("log1p", _same_float, method=True)
def log1p(x):
    return np.log1p(x)
log1p.defvjp(lambda g, out, x: div(g, add(x, 1)))


@primitive("erf", _same_float, method=True)
def erf(x):
    from scipy import special  # on first use: importing scipy.special takes ~0.3 s

    return special.erf(x)
erf.defvjp(lambda g, out, x: mul(g, mul(exp(neg(mul(x, x))), 2 / math.sqrt(math.pi))))


@primitive("gelu", lambda x, approximate: _same_float(x))
def gelu(x, approximate):
    """x * Phi(x), Phi the normal distribution (``approximate="tanh"``: its tanh fit)."""
    if approximate == "tanh":
        inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)
        return 0.5 * x * (1 + np.tanh(inner))
    from scipy import special

    return 0.5 * x * (1 + special.erf(x / math.sqrt(2)))


def _gelu_vjp(g, out, x, approximate):
    if approximate == "tanh":
        inner = mul(add(x, mul(pow_(x, 3), 0.044715)), math.sqrt(2 / math.pi))
        t = tanh(inner)
        d_inner = mul(add(mul(mul(x, x), 3 * 0.044715), 1.0), math.sqrt(2 / math.pi))
        slope = add(mul(add(t, 1.0), 0.5), mul(mul(mul(x, 0.5), sub(1.0, mul(t, t))), d_inner))
        return mul(g, slope)
    cdf = mul(add(erf(mul(x, 1 / math.sqrt(2))), 1.0), 0.5)
    pdf = mul(exp(mul(mul(x, x), -0.5)), 1 / math.sqrt(2 * math.pi))
    return mul(g, add(cdf, mul(x, pdf)))


gelu.defvjp(_gelu_vjp)


@primitive("isnan", lambda x: (x.shape, _BOOL), method=True)
def isnan(x):
    return np.isnan(x)
# No vjp: a mask.


@primitive("isinf", lambda x: (x.shape, _BOOL), method=True)
def isinf(x):
    return np.isinf(x)
# No vjp: a mask.


@primitive("abs", _same, method=True, out=True)
def abs_(x, out=None):
    return np.abs(x, out=out)
abs_.defvjp(lambda g, out, x: mul(g, sign(x)))


@primitive("sign", _same, method=True, out=True)
def sign(x, out=None):
    return np.sign(x, out=out)
sign.defvjp(lambda g, out, x: mul(g, 0.0))


@primitive("sin", _same_float, method=True)
def sin(x):
    return np.sin(x)
sin.defvjp(lambda g, out, x: mul(g, cos(x)))


@primitive("cos", _same_float, method=True)
def cos(x):
    return np.cos(x)
cos.defvjp(lambda g, out, x: neg(mul(g, sin(x))))


@primitive("tanh", _same_float, method=True, out=True)
def tanh(x, out=None):
    return np.tanh(x, out=out)
tanh.defvjp(lambda g, out, x: mul(g, sub(1.0, mul(out, out))))


@primitive("sigmoid", _same_float, method=True)
def sigmoid(x):
    # Split by sign so that exp never overflows.
    x = np.asarray(x)
    z = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + z), z / (1.0 + z)).astype(x.dtype, copy=False)
sigmoid.defvjp(lambda g, out, x: mul(g, mul(out, sub(1.0, out))))


@primitive("relu", _same, method=True, out=True)
def relu(x, out=None):
    return np.maximum(x, 0, out=out)
# From the output, as PyTorch's ReluBackward: out > 0 exactly where x > 0, and the output is
# kept for the next layer's weight gradient anyway, so the input need not be kept at all.
relu.defvjp(lambda g, out, x: threshold_backward(g, out))


def _gradient_shape(g, result, **attrs):
    if g.shape != result.shape:
        raise ShapeError(f"gradient of shape {g.shape} for a result of shape {result.shape}")
    return g.shape, g.dtype


@primitive("threshold_backward", _gradient_shape, out=True)
def threshold_backward(g, result, out=None):
    """ReLU's backward (PyTorch's name): ``g`` where ``result > 0``, else 0. One node, where
    ``mul(g, gt(result, 0))`` made two and a mask."""
    return np.multiply(g, result > 0, out=out)
threshold_backward.defvjp(lambda gg, out, g, result: threshold_backward(gg, result), None)


def _clamp_shape(x, min=None, max=None):
    if min is None and max is None:
        raise ShapeError("at least one of 'min' or 'max' must not be None")
    return x.shape, result_dtype(x, *(v for v in (min, max) if v is not None))


@primitive("clamp", _clamp_shape)
def clamp(x, min=None, max=None):
    return np.clip(x, min, max)
clamp.defvjp(lambda g, out, x, min=None, max=None: mul(g, _inside(x, min, max)))


def _inside(x, low, high):
    """Bool mask of low <= x <= high, either bound optional."""
    masks = [m for m in (low is not None and ge(x, low), high is not None and le(x, high)) if m]
    return masks[0] if len(masks) == 1 else bitwise_and(*masks)


# --- comparisons and logic (no gradient) ----------------------------------------------------

def _comparison(name: str, fn: Callable) -> Primitive:
    return primitive(name, _compare)(fn)


eq = _comparison("eq", np.equal)
ne = _comparison("ne", np.not_equal)
lt = _comparison("lt", np.less)
le = _comparison("le", np.less_equal)
gt = _comparison("gt", np.greater)
ge = _comparison("ge", np.greater_equal)
logical_not = primitive("logical_not", lambda x: (x.shape, _BOOL))(np.logical_not)


def _bitwise_shape(name: str) -> Callable:
    def shape(*inputs):
        dtype = result_dtype(*inputs)
        if dtype.kind not in "biu":  # PyTorch: bitwise ops exist for integers and bools only
            raise ShapeError(f"not implemented for {dtype} (expected integer or bool tensors; "
                             f"{name} is logical on bool and bitwise on integers)")
        return broadcast_shapes(*(shape_of(i) for i in inputs)), dtype
    return shape


bitwise_and = primitive("bitwise_and", _bitwise_shape("&"))(np.bitwise_and)
bitwise_or = primitive("bitwise_or", _bitwise_shape("|"))(np.bitwise_or)
bitwise_xor = primitive("bitwise_xor", _bitwise_shape("^"))(np.bitwise_xor)
bitwise_not = primitive("bitwise_not", _bitwise_shape("~"))(np.invert)


# --- reductions -----------------------------------------------------------------------------

@primitive("sum", _reduction)
def sum_(x, dim=None, keepdim=False):
    if x.dtype == HALF:  # accumulated in float32 and rounded once, as PyTorch does
        return x.sum(axis=dim, keepdims=keepdim, dtype=np.float32).astype(HALF)
    return x.sum(axis=dim, keepdims=keepdim)  # the method: np.sum's wrapper costs ~1 us
sum_.defvjp(lambda g, out, x, dim=None, keepdim=False: expand(_keep(g, dim, keepdim), x.shape))


def _cumsum_shape(x, dim, reverse=False):
    return x.shape, x.dtype if _category(x.dtype) == 2 else _INT64


@primitive("cumsum", _cumsum_shape)
def cumsum(x, dim, reverse=False):
    """Running sums along ``dim`` (``reverse``: from the end, what the vjp needs)."""
    if x.dtype == HALF:  # accumulated in float32, as PyTorch does
        return cumsum.forward(x.astype(np.float32), dim, reverse).astype(HALF)
    if reverse:
        return np.flip(np.cumsum(np.flip(x, dim), axis=dim), dim)
    return np.cumsum(x, axis=dim)
cumsum.defvjp(lambda g, out, x, dim, reverse=False: cumsum(g, dim=dim, reverse=not reverse))


@primitive("flip", _same, view=True)
def flip(x, dims):
    return np.flip(x, dims)
flip.defvjp(lambda g, out, x, dims: flip(g, dims=dims))


def _keep(g: Node, dims: tuple, keepdim: bool) -> Node:
    """Reinsert reduced dimensions as size 1 so that ``g`` broadcasts against the input."""
    if keepdim or not dims:
        return g
    shape = list(g.shape)
    for d in dims:
        shape.insert(d, 1)
    return reshaped(g, tuple(shape))


def _norm_shape(x, dim=None, keepdim=False):
    return _reduced_shape(x.shape, dim, keepdim), float_dtype(x.dtype)


@primitive("norm", _norm_shape, grad_name="NormBackward1")
def norm(x, dim=None, keepdim=False):
    """The 2-norm over ``dim``: one node, so that its gradient at 0 is 0 (PyTorch's
    subgradient), where ``sqrt(sum(x * x))`` would give nan. Half precision is accumulated
    in float32, as in PyTorch."""
    if x.dtype == HALF:
        return norm.forward(x.astype(np.float32), dim, keepdim).astype(HALF)
    return np.sqrt(np.sum(np.square(x), axis=dim, keepdims=keepdim))


def _norm_vjp(g, out, x, dim=None, keepdim=False):
    scale = _keep(out, dim, keepdim)
    ratio = where(gt(scale, 0), div(x, scale), 0.0)
    return mul(_keep(g, dim, keepdim), ratio)


norm.defvjp(_norm_vjp)


@primitive("prod", _reduction)
def prod(x, dim=None, keepdim=False):
    return np.prod(x, axis=dim, keepdims=keepdim)
prod.defvjp(
    lambda g, out, x, dim=None, keepdim=False: mul(
        expand(_keep(g, dim, keepdim), x.shape), prod_others(x, dim=dim)
    )
)


@primitive("prod_others", lambda x, dim: (x.shape, x.dtype))
def prod_others(x, dim):
    """For each element, the product of the other elements of its reduction group; exact
    where the group holds zeros (where ``out / x`` would divide by zero)."""
    moved = np.moveaxis(np.asarray(x), dim, tuple(range(-len(dim), 0)))
    flat = moved.reshape(moved.shape[: moved.ndim - len(dim)] + (-1,))
    ones = np.ones(flat.shape[:-1] + (1,), dtype=flat.dtype)
    left = np.cumprod(np.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1)
    right = np.cumprod(np.concatenate([ones, flat[..., :0:-1]], axis=-1), axis=-1)[..., ::-1]
    return np.moveaxis((left * right).reshape(moved.shape), tuple(range(-len(dim), 0)), dim)
# prod_others has no vjp, so a second derivative of prod is not available.


def _extreme_vjp(g, out, x, dim=None, keepdim=False):
    """amax/amin: the gradient is shared evenly among the elements equal to the extreme."""
    hits = eq(x, expand(_keep(out, dim, keepdim), x.shape))
    count = sum_(hits, dim=dim, keepdim=True)
    return div(mul(expand(_keep(g, dim, keepdim), x.shape), hits), count)


@primitive("amax", _reduction_same, grad_name="MaxBackward1")
def amax(x, dim=None, keepdim=False):
    return x.max(axis=dim, keepdims=keepdim)
amax.defvjp(_extreme_vjp)


@primitive("amin", _reduction_same, grad_name="MinBackward1")
def amin(x, dim=None, keepdim=False):
    return x.min(axis=dim, keepdims=keepdim)
amin.defvjp(_extreme_vjp)


def _arg_shape(x, dim=None, keepdim=False):
    if x.shape and 0 in (x.shape if dim is None else (x.shape[dim],)):
        raise ShapeError(f"cannot take the index of an extreme of an empty shape {x.shape}")
    if dim is None:
        return ((1,) * len(x.shape) if keepdim else ()), _INT64
    return _reduced_shape(x.shape, (dim,), keepdim), _INT64


@primitive("argmax", _arg_shape)
def argmax(x, dim=None, keepdim=False):
    return np.argmax(x, axis=dim, keepdims=keepdim)


@primitive("argmin", _arg_shape)
def argmin(x, dim=None, keepdim=False):
    return np.argmin(x, axis=dim, keepdims=keepdim)


def _along_shape(x, index, dim):
    return index.shape, x.dtype


def _along_grid(index: np.ndarray, dim: int) -> tuple:
    grid = list(np.indices(index.shape, sparse=True))
    grid[dim] = index
    return tuple(grid)


@primitive("take_along_dim", _along_shape, grad_name="GatherBackward0")
def take_along_dim(x, index, dim):
    return np.take_along_axis(x, index, axis=dim)
take_along_dim.defvjp(
    lambda g, out, x, index, dim: put_along_dim(g, index, shape=x.shape, dim=dim), None
)


@primitive("put_along_dim", lambda g, index, shape, dim: (shape, g.dtype))
def put_along_dim(g, index, shape, dim):
    """Scatter-add ``g`` into zeros of ``shape`` at ``index`` along ``dim``."""
    out = np.zeros(shape, dtype=g.dtype)
    np.add.at(out, _along_grid(index, dim), g)
    return out
put_along_dim.defvjp(lambda g, out, g_in, index, shape, dim: gather(g, index, dim))


def _scatter_shape(x, index, src, dim):
    if isinstance(src, Node) and src.shape != index.shape:
        raise ShapeError(f"src of shape {src.shape} does not match index of shape "
                         f"{index.shape}")
    return x.shape, x.dtype


@primitive("scatter", _scatter_shape, grad_name="ScatterBackward0")
def scatter(x, index, src, dim):
    """``x`` with ``src`` written at ``index`` along ``dim`` (``src``: same shape as ``index``,
    or a number); where an index repeats, one of its writes wins, as in PyTorch."""
    out = np.array(x, copy=True)
    out[_along_grid(index, dim)] = src
    return out


_INDEX_ERRORS = {"IndexError": IndexError, "RuntimeError": RuntimeError}


def _check_indices(index: np.ndarray, size: int, error: str, message: str | tuple) -> None:
    """PyTorch's bounds check of an index argument: every value in ``[0, size)``, negative
    ones included (they would wrap in numpy). ``message``: one text, or one for a value
    below 0 and one for a value too large; ``{index}`` stands for the first bad value."""
    if not index.size:
        return
    # One pass in the common case: seen unsigned, a negative value is beyond any size.
    unsigned = index.view(index.dtype.str.replace("i", "u")) if index.dtype.kind == "i" \
        else index
    if not (unsigned >= size).any():
        return
    low, high = index.min(), index.max()
    if isinstance(message, tuple):
        message = message[0] if low < 0 else message[1]
    bad = low if low < 0 else high
    raise _INDEX_ERRORS[error](message.format(index=int(bad)))


@primitive("check_index", lambda index, *, size, error, message: (index.shape, index.dtype))
def check_index(index, *, size, error, message):
    """``index`` itself once its values passed :func:`_check_indices`: where an op's index
    is computed by the graph, the check runs in the task, named and pointing at the line."""
    _check_indices(index, size, error, message)
    return index


def checked_index(index: Node, size: int, error: str, message: str | tuple, op: str) -> Node:
    """``index`` bounds-checked for ``op``, which refuses negative and too large values: at
    once when its value is here (the user's line raises), else in the task that reads it."""
    message = tuple(f"{op}: {text}" for text in message) if isinstance(message, tuple) \
        else f"{op}: {message}"
    if isinstance(index.value, np.ndarray):
        _check_indices(index.value, size, error, message)
        return index
    return check_index(index, size=size, error=error, message=message)


def out_of_bounds(dim: int, size: int) -> str:
    """gather's and scatter's message, as PyTorch words it."""
    return f"index {{index}} is out of bounds for dimension {dim} with size {size}"


def gather(x: Node, where: Node, dim: int) -> Node:
    """PyTorch's gather: ``take_along_dim`` of ``x`` cut to ``where``'s size in the other
    dimensions first (an index may be smaller than the tensor there)."""
    if any(n != m for d, (n, m) in enumerate(zip(x.shape, where.shape)) if d != dim):
        x = index(x, spec=tuple(slice(None) if d == dim else slice(0, n)
                                for d, n in enumerate(where.shape)))
    return take_along_dim(x, where, dim=dim)


scatter.defvjp(
    lambda g, out, x, index, src, dim: scatter(g, index, 0.0, dim=dim),
    None,
    lambda g, out, x, index, src, dim: gather(g, index, dim),
)


def _argsort_shape(x, dim, descending, stable):
    return x.shape, _INT64


@primitive("argsort", _argsort_shape)
def argsort(x, dim, descending, stable):
    """Stable sort order along ``dim`` (NaN last ascending, first descending, as PyTorch)."""
    if not descending:
        return np.argsort(x, axis=dim, kind="stable")
    flipped = np.argsort(np.flip(x, dim), axis=dim, kind="stable")
    return x.shape[dim] - 1 - np.flip(flipped, dim)  # ties keep their order, as ascending


# --- shapes ---------------------------------------------------------------------------------

def _reshape_shape(x, shape):
    size = math.prod(x.shape)
    if shape.count(-1) > 1:
        raise ShapeError("only one dimension can be inferred")
    known = math.prod(n for n in shape if n != -1)
    if -1 in shape:
        if known == 0 or size % known:
            raise ShapeError(f"shape {tuple(shape)} is invalid for input of size {size}")
        shape = tuple(size // known if n == -1 else n for n in shape)
    if math.prod(shape) != size:
        raise ShapeError(f"shape {tuple(shape)} is invalid for input of size {size}")
    return tuple(shape), x.dtype


@primitive("reshape", _reshape_shape, grad_name="ViewBackward0", view=True)
def reshape(x, shape):
    return np.reshape(x, shape)
reshape.defvjp(lambda g, out, x, shape: reshaped(g, x.shape))


def _permute_shape(x, dims):
    if sorted(dims) != list(range(len(x.shape))):
        raise ShapeError(f"dims {tuple(dims)} are not a permutation of the {len(x.shape)} "
                         f"dimensions of shape {x.shape}")
    return tuple(x.shape[d] for d in dims), x.dtype


@primitive("permute", _permute_shape, view=True)
def permute(x, dims):
    return np.transpose(x, dims)
permute.defvjp(lambda g, out, x, dims: permute(g, dims=tuple(np.argsort(dims).tolist())))


def _expand_shape(x, shape):
    lead = len(shape) - len(x.shape)
    if lead < 0 or any(n != s and n != 1 for n, s in zip(x.shape, shape[lead:])):
        raise ShapeError(f"shape {x.shape} cannot be expanded to {tuple(shape)}")
    return tuple(shape), x.dtype


@primitive("expand", _expand_shape, view=True)
def expand(x, shape):
    return np.broadcast_to(x, shape)
expand.defvjp(lambda g, out, x, shape: unbroadcast(g, x.shape))


class IndexSlot:
    """Stands in an index spec for the k-th index tensor, which is an input of the node."""

    __slots__ = ("k",)

    def __init__(self, k: int) -> None:
        self.k = k

    def __reduce__(self):
        return IndexSlot, (self.k,)

    def __eq__(self, other: object) -> bool:  # equal specs: equal structure (backward cache)
        return isinstance(other, IndexSlot) and other.k == self.k

    def __hash__(self) -> int:
        return hash((IndexSlot, self.k))


def fill_index(spec: tuple, index_values: tuple) -> tuple:
    return tuple(index_values[i.k] if isinstance(i, IndexSlot) else i for i in spec)


def _index_shape(x, *index_nodes, spec):
    dummies = tuple(np.zeros(n.shape, dtype=np.intp) for n in index_nodes)
    probe = np.broadcast_to(np.zeros((), dtype=x.dtype), x.shape)
    try:
        return probe[fill_index(spec, dummies)].shape, x.dtype
    except IndexError as error:
        raise IndexError(f"index: {error} (tensor of shape {x.shape})") from None


def _index_cost(node: Node) -> float | None:
    """Basic indexing (ints, slices, None, ...) is a view in numpy: as free as a reshape."""
    basic = all(i is None or i is Ellipsis or isinstance(i, (int, slice))
                for i in node.attrs["spec"])
    return 1e-6 if basic and len(node.inputs) == 1 else None


@primitive("index", _index_shape, cost=_index_cost)
def index(x, *index_values, spec):
    return np.asarray(x)[fill_index(spec, index_values)]
index.defvjp(lambda g, out, x, *idx, spec: index_add(g, *idx, shape=x.shape, spec=spec), None)


@primitive("index_add", lambda g, *idx, shape, spec: (shape, g.dtype), grad_name="IndexBackward0")
def index_add(g, *index_values, shape, spec):
    """Scatter-add ``g`` into zeros of ``shape`` at ``spec`` (repeated indices add up)."""
    out = np.zeros(shape, dtype=np.asarray(g).dtype)
    np.add.at(out, fill_index(spec, index_values), g)
    return out
index_add.defvjp(lambda g, out, g_in, *idx, shape, spec: index(g, *idx, spec=spec), None)


def _index_put_shape(x, value, *index_nodes, spec):
    target_shape, _ = _index_shape(x, *index_nodes, spec=spec)
    try:
        broadcast_shapes(target_shape, shape_of(value))
        if len(shape_of(value)) > len(target_shape) and any(
                n != 1 for n in shape_of(value)[:len(shape_of(value)) - len(target_shape)]):
            raise ShapeError("")
    except ShapeError:
        raise ShapeError(f"shape mismatch: value tensor of shape {shape_of(value)} cannot be "
                         f"broadcast to indexing result of shape {target_shape}") from None
    return x.shape, x.dtype


@primitive("index_put", _index_put_shape, grad_name="IndexPutBackward0")
def index_put(x, value, *index_values, spec):
    """``x`` with ``x[spec] = value``: what ``x[key] = value`` records."""
    out = np.array(x, copy=True)
    out[fill_index(spec, index_values)] = value  # numpy drops the value's leading 1s too
    return out


def _index_put_value_vjp(g, out, x, value, *idx, spec):
    taken = index(g, *idx, spec=spec)
    extra = len(value.shape) - len(taken.shape)  # leading 1s the value may have beyond it
    core = value.shape[extra:] if extra > 0 else value.shape
    return reshaped(unbroadcast(taken, core), value.shape)


index_put.defvjp(
    lambda g, out, x, value, *idx, spec: index_put(g, 0.0, *idx, spec=spec),
    _index_put_value_vjp,
    None,
)


def _cat_shape(*xs, dim):
    if not xs:
        raise ShapeError("expected a non-empty sequence of tensors")
    first = xs[0].shape
    d = normalize_dim(dim, len(first))
    for x in xs[1:]:
        if len(x.shape) != len(first) or any(
            a != b for i, (a, b) in enumerate(zip(x.shape, first)) if i != d
        ):
            raise ShapeError(f"sizes of tensors must match except in dimension {d}: "
                             f"got {first} and {x.shape}")
    total = sum(x.shape[d] for x in xs)
    return first[:d] + (total,) + first[d + 1:], result_dtype(*xs)


@primitive("cat", _cat_shape)
def cat(*xs, dim):
    return np.concatenate(xs, axis=dim)


def _cat_vjp_of_many(g, out, positions, *xs, dim):
    d = normalize_dim(dim, len(out.shape))
    starts = np.cumsum([0] + [x.shape[d] for x in xs]).tolist()
    contributions = []
    for k in positions:
        rows = (d, starts[k], starts[k + 1])
        if _from_part(g, rows, PUSH_DEPTH):  # no slice of the whole, no join of the parts
            contributions.append(_part(g, rows, PUSH_DEPTH))
        else:
            contributions.append(index(g, spec=(slice(None),) * d + (slice(*rows[1:]),)))
    return contributions


cat.defvjp_of_many(_cat_vjp_of_many)

#: How many elementwise nodes a slice of a concatenation's gradient is pushed through.
PUSH_DEPTH = 8


def _from_part(g: Node, rows: tuple[int, int, int], depth: int) -> bool:
    """Whether ``g[start:stop]`` along ``d`` (``rows``) can be computed from the part of a
    concatenation it comes from: ``g`` is a concatenation with that part, or elementwise on
    such a node, other operands broadcast along ``d`` or of ``g``'s shape (sliced)."""
    d, start, stop = rows
    if g.op is cat:
        if normalize_dim(g.attrs["dim"], len(g.shape)) != d:
            return False
        edge = 0
        for part in g.inputs:
            if edge == start:
                return (isinstance(part, Node) and edge + part.shape[d] == stop
                        and part.dtype == g.dtype)
            edge += part.shape[d]
        return False
    if depth == 0 or not (g.op.out or g.op is add_n):
        return False
    full = [i for i in g.inputs if isinstance(i, Node) and not _broadcast_along(i, g, d)]
    return (all(i.shape == g.shape for i in full)
            and any(_from_part(i, rows, depth - 1) for i in full))


def _broadcast_along(x: Node, g: Node, d: int) -> bool:
    """Whether operand ``x`` of ``g`` broadcasts along ``g``'s dimension ``d``."""
    axis = d - (len(g.shape) - len(x.shape))
    return axis < 0 or x.shape[axis] == 1


def _part(g: Node, rows: tuple[int, int, int], depth: int = PUSH_DEPTH,
          made: dict | None = None) -> Node:
    """``g[start:stop]`` along ``d`` where :func:`_from_part` says so, computed from the part
    of the concatenation it comes from (elementwise ops again on slices: the same numbers).
    A data-parallel loss's gradient for one shard then reads that shard alone, and the
    shard's backward starts when its own forward ends (DataParallel's outputs, concatenated,
    under an elementwise loss such as ``mse_loss``)."""
    d, start, stop = rows
    if g.op is cat:
        edge = 0
        for part in g.inputs:
            if edge == start:
                return part
            edge += part.shape[d]
    made = {} if made is None else made  # a node read twice is sliced once
    if g in made:
        return made[g]
    inputs = []
    for i in g.inputs:
        if not isinstance(i, Node) or _broadcast_along(i, g, d):
            inputs.append(i)
        elif i in made:
            inputs.append(made[i])
        elif _from_part(i, rows, depth - 1):
            inputs.append(_part(i, rows, depth - 1, made))
        else:  # an operand of the whole's shape from elsewhere (a target): its slice
            made[i] = index(i, spec=(slice(None),) * d + (slice(start, stop),))
            inputs.append(made[i])
    made[g] = g.op(*inputs, **g.attrs)
    return made[g]


def _gemm_cost(node: Node) -> float:
    """A matrix product's time at ~20 GFLOP/s plus a call: 2 * outputs * inner size."""
    x = node.inputs[0]
    inner = x.shape[-1] if x.shape else 1
    return 3e-6 + 2 * math.prod(node.shape) * inner / 20e9


def _matmul_shape(x, y):
    if not x.shape or not y.shape:
        raise ShapeError(f"both arguments must be at least 1-D, got shapes {x.shape} and {y.shape}")
    xs = x.shape if len(x.shape) > 1 else (1,) + x.shape
    ys = y.shape if len(y.shape) > 1 else y.shape + (1,)
    if xs[-1] != ys[-2]:
        raise ShapeError(f"shapes {x.shape} and {y.shape} cannot be multiplied")
    if x.dtype != y.dtype:  # PyTorch does not promote in matmul
        raise ShapeError(f"expected m1 and m2 to have the same dtype, but got: {x.dtype} != "
                         f"{y.dtype}")
    batch = broadcast_shapes(xs[:-2], ys[:-2])
    out = batch + (xs[-2] if len(x.shape) > 1 else None, ys[-1] if len(y.shape) > 1 else None)
    return tuple(n for n in out if n is not None), result_dtype(x, y)


@primitive("matmul", _matmul_shape, grad_name="MmBackward0", cost=lambda node: _gemm_cost(node))
def matmul(x, y):
    return np.matmul(x, y)


def _matmul_vjp(which: int) -> Callable:
    """1-D operands are promoted to matrices, differentiated as such, and reshaped back."""

    def vjp(g, out, x, y):
        x2 = x if len(x.shape) > 1 else reshape(x, shape=(1,) + x.shape)
        y2 = y if len(y.shape) > 1 else reshape(y, shape=y.shape + (1,))
        out2 = broadcast_shapes(x2.shape[:-2], y2.shape[:-2]) + (x2.shape[-2], y2.shape[-1])
        g2 = reshaped(g, out2)
        if which == 0:
            return reshaped(unbroadcast(matmul(g2, swap_last(y2)), x2.shape), x.shape)
        return reshaped(unbroadcast(matmul(swap_last(x2), g2), y2.shape), y.shape)

    return vjp


matmul.defvjp(_matmul_vjp(0), _matmul_vjp(1))


def _linear_shape(x, w, b=None):
    if len(w.shape) != 2 or not x.shape or x.shape[-1] != w.shape[1]:
        raise ShapeError(f"input of shape {x.shape} and weight of shape {w.shape} cannot be "
                         f"multiplied (expected the input's last dimension to be "
                         f"{w.shape[1] if len(w.shape) == 2 else '?'})")
    if b is not None and shape_of(b) not in ((), (w.shape[0],)):
        raise ShapeError(f"bias of shape {shape_of(b)} does not match {w.shape[0]} outputs")
    bias_node = isinstance(b, Node)
    if w.dtype != x.dtype or (bias_node and b.dtype != x.dtype):  # PyTorch does not promote
        mixed = {x.dtype, w.dtype} | ({b.dtype} if bias_node else set())
        raise ShapeError(f"mat1 and mat2 must have the same dtype, but got "
                         f"{' and '.join(sorted(d.name for d in mixed))}")
    shape = x.shape[:-1] + (w.shape[0],)
    return shape, x.dtype if b is None or bias_node else result_dtype(x, w, b)


@primitive("linear", _linear_shape, grad_name="AddmmBackward0", cost=lambda node: _gemm_cost(node))
def linear(x, w, b=None):
    """x @ w.T + b as one node: an MLP layer is one task and three vjp nodes, not a dozen."""
    out = np.matmul(x, w.T)
    if b is not None:
        out += b
    return out


def _rows(t: Node) -> Node:
    """``t`` with its leading dimensions flattened into one: (..., n) -> (rows, n)."""
    return reshaped(t, (math.prod(t.shape[:-1]), t.shape[-1]))


def _weight_grad_shape(g, x):
    if not g.shape or g.shape[:-1] != x.shape[:-1]:
        raise ShapeError(f"gradient of shape {g.shape} for an input of shape {x.shape}")
    return (g.shape[-1], x.shape[-1]), result_dtype(g, x)


def _weight_grad_cost(node: Node) -> float:
    g = node.inputs[0]
    return 3e-6 + 2 * math.prod(node.shape) * math.prod(g.shape[:-1]) / 20e9


@primitive("linear_weight_grad", _weight_grad_shape, grad_name="MmBackward0",
           cost=_weight_grad_cost)
def linear_weight_grad(g, x):
    """Linear's weight gradient, ``rows(g).T @ rows(x)``, as one node (a transpose node and a
    matrix product before; the same BLAS call)."""
    if g.ndim != 2:
        g, x = np.reshape(g, (-1, g.shape[-1])), np.reshape(x, (-1, x.shape[-1]))
    return np.matmul(g.T, x)


linear_weight_grad.defvjp(
    lambda gg, out, g, x: reshaped(matmul(_rows(x), swap_last(gg)), g.shape),
    lambda gg, out, g, x: reshaped(matmul(_rows(g), gg), x.shape),
)


linear.defvjp(
    lambda g, out, x, w, b=None: matmul(g, w),
    lambda g, out, x, w, b=None: linear_weight_grad(g, x),
    lambda g, out, x, w, b=None: unbroadcast(g, b.shape),
)


def parse_einsum(equation: str, shapes: list[tuple]) -> str:
    """``equation`` made explicit for these operand shapes: ``...`` spelled out with unused
    letters (right-aligned, as numpy and PyTorch broadcast them) and the output written out
    (implicit mode: the letters used once, in alphabetical order, after the ellipsis)."""
    equation = equation.replace(" ", "")
    inputs, arrow, output = equation.partition("->")
    terms = inputs.split(",")
    if len(terms) != len(shapes):
        raise ShapeError(f"{len(terms)} operands in the equation {equation!r} but "
                         f"{len(shapes)} tensors given")
    spare = iter(sorted(set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
                        - set(equation)))
    widest = max((len(shape) - len(term.replace("...", "")) for term, shape in
                  zip(terms, shapes) if "..." in term), default=0)
    ellipsis = "".join(next(spare) for _ in range(widest))
    explicit = []
    for term, shape in zip(terms, shapes):
        if "..." in term:
            term = term.replace("...", ellipsis[widest - (len(shape) - len(term) + 3):])
        if len(term) != len(shape) or not term.isalpha():
            raise ShapeError(f"the subscripts {term!r} do not match an operand of shape {shape}")
        explicit.append(term)
    if arrow:
        output = output.replace("...", ellipsis)
    else:
        letters = "".join(explicit)
        output = ellipsis + "".join(sorted(c for c in set(letters) if letters.count(c) == 1
                                           and c not in ellipsis))
    return ",".join(explicit) + "->" + output


def _einsum_sizes(equation: str, shapes: list[tuple]) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for term, shape in zip(equation.split("->")[0].split(","), shapes):
        for letter, n in zip(term, shape):
            known = sizes.get(letter, 1)
            if n != 1 and known != 1 and n != known:
                raise ShapeError(f"subscript {letter!r} has size {n} for one operand but "
                                 f"{known} for another")
            sizes[letter] = max(known, n)
    return sizes


def _einsum_shape(*xs, equation):
    sizes = _einsum_sizes(equation, [x.shape for x in xs])
    output = equation.split("->")[1]
    if any(c not in sizes for c in output) or len(set(output)) != len(output):
        raise ShapeError(f"invalid output subscripts in {equation!r}")
    return tuple(sizes[c] for c in output), result_dtype(*xs)


def _einsum_cost(node: Node) -> float:
    sizes = _einsum_sizes(node.attrs["equation"], [x.shape for x in node.inputs])
    return 3e-6 + 2 * math.prod(sizes.values()) / 20e9


@primitive("einsum", _einsum_shape, cost=_einsum_cost)
def einsum(*xs, equation):
    """Einstein summation (``equation`` explicit, see :func:`parse_einsum`)."""
    return np.einsum(equation, *xs, optimize=len(xs) > 2)


def _einsum_vjp(position: int) -> Callable:
    def vjp(g, out, *xs, equation):
        terms, output = equation.split("->")
        terms = terms.split(",")
        term = terms[position]
        if len(set(term)) != len(term):
            raise NotImplementedError(f"einsum: the gradient of an operand with a repeated "
                                      f"subscript ({term!r}: a diagonal) is not supported")
        others = [t for k, t in enumerate(terms) if k != position]
        reached = set(output).union(*others)
        kept = "".join(c for c in term if c in reached)
        grad = einsum(g, *(x for k, x in enumerate(xs) if k != position),
                      equation=",".join([output, *others]) + "->" + kept)
        x = xs[position]
        grad = reshaped(grad, tuple(grad.shape[kept.index(c)] if c in reached else 1
                                    for c in term))
        wide = tuple(d for d, (n, m) in enumerate(zip(x.shape, grad.shape)) if n == 1 and m != 1)
        if wide:
            grad = sum_(grad, dim=wide, keepdim=True)
        return expand(grad, x.shape) if grad.shape != x.shape else grad  # x's own sums
    return vjp


einsum.defvjp_at(_einsum_vjp)


# --- optimizer updates: one node per tensor and formula, no gradient ------------------------
# PyTorch's formulas (torch.optim.sgd/adam), written with the same numpy operations in the same
# order as the composite Tensor arithmetic they replace, so results are bit-identical; one node
# instead of 2-12 per parameter and step.

def _like_first(x, *others, **attrs):
    return x.shape, x.dtype


def _decayed(grad, param, weight_decay):
    return grad + weight_decay * param if weight_decay else grad


@primitive("momentum_buffer", _like_first)
def momentum_buffer(grad, param, buf=None, *, momentum, dampening, weight_decay):
    """SGD's new momentum buffer (the first step copies the direction)."""
    d_p = _decayed(grad, param, weight_decay)
    return d_p.copy() if buf is None else buf * momentum + (1 - dampening) * d_p


@primitive("sgd_step", _like_first)
def sgd_step(param, grad, buf=None, *, lr, momentum, weight_decay, nesterov):
    """SGD's new parameter, from its gradient and (with momentum) its new buffer."""
    d_p = _decayed(grad, param, weight_decay)
    if buf is not None:
        d_p = d_p + momentum * buf if nesterov else buf
    # param - lr * d_p, bit for bit, in one new array instead of two (a - b is a + -b).
    # asarray: numpy gives a scalar, not an array, for a 0-d parameter, and out= needs one.
    step = np.asarray(np.multiply(d_p, -lr))
    return np.add(param, step, out=step)


@primitive("adam_moment", _like_first)
def adam_moment(grad, param, moment=None, *, beta, weight_decay, square):
    """Adam's new first (``square=False``) or second moment estimate."""
    grad = _decayed(grad, param, weight_decay)
    moment = np.zeros_like(param) if moment is None else moment
    scaled = (1 - beta) * grad
    return moment * beta + (scaled * grad if square else scaled)


@primitive("adam_step", _like_first)
def adam_step(param, exp_avg, exp_avg_sq, *, lr, bias1, bias2_sqrt, eps, decoupled_decay):
    """Adam's new parameter (``decoupled_decay``: AdamW's factor ``lr * weight_decay``)."""
    if decoupled_decay:
        param = param * (1 - decoupled_decay)
    # param - (lr / bias1) * (exp_avg / denom), the same operations in place on temporaries.
    denom = np.asarray(np.sqrt(exp_avg_sq))  # an array for a 0-d parameter too
    np.divide(denom, float(bias2_sqrt), out=denom)
    np.add(denom, float(eps), out=denom)
    step = np.divide(exp_avg, denom, out=denom)
    np.multiply(step, float(lr / bias1), out=step)
    return np.subtract(param, step, out=step)


@primitive("root_mean_square", _like_first)
def root_mean_square(square_avg, grad_avg=None, *, eps):
    """RMSprop's denominator: ``sqrt(square_avg) + eps``, centered
    ``sqrt(square_avg - grad_avg**2) + eps``."""
    if grad_avg is not None:
        square_avg = square_avg - grad_avg * grad_avg
    return np.sqrt(square_avg) + eps


@primitive("rmsprop_buffer", _like_first)
def rmsprop_buffer(grad, param, avg, buf=None, *, momentum, weight_decay):
    """RMSprop's new momentum buffer: ``buf * momentum + grad / avg``."""
    buf = np.zeros_like(param) if buf is None else buf
    return buf * momentum + _decayed(grad, param, weight_decay) / avg


@primitive("rmsprop_step", _like_first)
def rmsprop_step(param, grad, avg, *, lr, weight_decay):
    """RMSprop's new parameter without momentum: ``param - lr * (grad / avg)``."""
    return param - lr * (_decayed(grad, param, weight_decay) / avg)


@primitive("scaled_step", _like_first)
def scaled_step(param, direction, *, lr):
    """``param - lr * direction``: the last formula of RMSprop with momentum and Adadelta."""
    return param - lr * direction


@primitive("adagrad_sum", _like_first)
def adagrad_sum(grad, param, total=None, *, weight_decay, initial):
    """Adagrad's new sum of squared gradients (starting at ``initial``)."""
    total = np.full_like(param, initial) if total is None else total
    grad = _decayed(grad, param, weight_decay)
    return total + grad * grad


@primitive("adagrad_step", _like_first)
def adagrad_step(param, grad, total, *, lr, eps, weight_decay):
    """Adagrad's new parameter: ``param - lr * (grad / (sqrt(total) + eps))``, ``lr`` already
    decayed for the step."""
    return param - lr * (_decayed(grad, param, weight_decay) / (np.sqrt(total) + eps))


@primitive("adadelta_delta", _like_first)
def adadelta_delta(grad, param, square_avg, acc_delta=None, *, eps, weight_decay):
    """Adadelta's step direction: ``sqrt(acc_delta + eps) / sqrt(square_avg + eps) * grad``."""
    acc_delta = np.zeros_like(param) if acc_delta is None else acc_delta
    return np.sqrt(acc_delta + eps) / np.sqrt(square_avg + eps) * \
        _decayed(grad, param, weight_decay)


# --- composites -----------------------------------------------------------------------------

def transpose(x: Node, dim0: int, dim1: int) -> Node:
    dims = list(range(len(x.shape)))
    a, b = normalize_dim(dim0, len(dims)), normalize_dim(dim1, len(dims))
    dims[a], dims[b] = dims[b], dims[a]
    return shown_as(permute(x, dims=tuple(dims)), "TransposeBackward0")


def mT(x: Node) -> Node:
    return transpose(x, -2, -1)


def shown_as(node: Node, grad_name: str, *inputs: Node) -> Node:
    """``node``, the result of a composite, with PyTorch's grad_fn name for the whole (its
    inputs are left alone if the composite returned one of them)."""
    if all(node is not i for i in inputs):
        node.grad_name = grad_name
    return node


def _count(x: Node, dims: tuple) -> int:
    return math.prod(x.shape[d] for d in dims)


def in_float32(composite: Callable) -> Callable:
    """A reduction of a half-precision tensor computed in float32 and rounded once at the
    end, as PyTorch accumulates them (the mean of 1,000 values of 100.0 is 100, not inf)."""

    def reduction(x: Node, *args: Any, **kwargs: Any) -> Node:
        if x.dtype != HALF:
            return composite(x, *args, **kwargs)
        out = composite(cast(x, dtype=np.dtype(np.float32)), *args, **kwargs)
        rounded = cast(out, dtype=HALF)
        rounded.grad_name = out.grad_name
        return rounded

    reduction.__name__ = reduction.__qualname__ = composite.__name__
    reduction.__doc__ = composite.__doc__
    return reduction


@in_float32
def mean(x: Node, dim=None, keepdim=False) -> Node:
    dims = normalize_dims(dim, len(x.shape))
    out = div(sum_(x, dim=dims, keepdim=keepdim), _count(x, dims))
    return shown_as(out, "MeanBackward0" if dim is None else "MeanBackward1")


@in_float32
def var(x: Node, dim=None, correction=1, keepdim=False) -> Node:
    dims = normalize_dims(dim, len(x.shape))
    centered = sub(x, mean(x, dims, keepdim=True))
    dof = max(_count(x, dims) - correction, 0)
    out = div(sum_(mul(centered, centered), dim=dims, keepdim=keepdim), dof)
    return shown_as(out, "VarBackward0")


@in_float32
def std(x: Node, dim=None, correction=1, keepdim=False) -> Node:
    return root_of_variance(var(x, dim, correction=correction, keepdim=keepdim))


@primitive("root_of_variance", _same_float, grad_name="StdBackward0")
def root_of_variance(v):
    """``sqrt`` of a variance: its gradient is 0 where the deviation is 0 (PyTorch's
    ``std_backward``), where sqrt's would be nan (a constant input)."""
    return np.sqrt(v)
root_of_variance.defvjp(lambda g, out, v: where(gt(out, 0), div(g, mul(out, 2.0)), 0.0))


@in_float32
def logsumexp(x: Node, dim, keepdim=False) -> Node:
    """Stable: the max is subtracted first; it carries no gradient since its terms cancel.
    An infinite max is not subtracted (a row of -inf gives -inf, as in PyTorch, not nan)."""
    dims = normalize_dims(dim, len(x.shape))
    shift = amax(x, dim=dims, keepdim=True)
    shift = stop_gradient(where(isinf(shift), 0.0, shift))
    total = log(sum_(exp(sub(x, shift)), dim=dims, keepdim=True))
    out = add(total, shift)
    out = out if keepdim else reshape(out, shape=_reduced_shape(x.shape, dims, False))
    return shown_as(out, "LogsumexpBackward0")


def _floating(x: Node) -> Node:
    """``x``, cast to the float dtype PyTorch would compute in if it is not a float."""
    return x if x.dtype.kind in "fc" else cast(x, dtype=float_dtype(x.dtype))


def log_softmax(x: Node, dim: int) -> Node:
    x = _floating(x)
    return log_softmax_of(x, dim=normalize_dims(dim, len(x.shape)))


@primitive("log_softmax", _same, grad_name="LogSoftmaxBackward0")
def log_softmax_of(x, *, dim):
    """``x - logsumexp(x)`` as one node (the composite made eight, and ten for its backward),
    with the same numpy operations in the same order: the max is subtracted first."""
    shift = x.max(axis=dim, keepdims=True)
    total = np.log(np.exp(x - shift).sum(axis=dim, keepdims=True))
    return x - (total + shift)


def _log_softmax_vjp(g: Node, out: Node, x: Node, dim: tuple) -> Node:
    # Cross-entropy's backward is nll_loss's gradient, then log_softmax's: one node, unless
    # the gradient is differentiable (create_graph), where the pair has the vjps.
    if g.op is nll_loss_backward and not grad_mode.enabled:
        loss_gradient, target, *weight = g.inputs
        attrs = dict(dim=dim, reduction=g.attrs["reduction"],
                     ignore_index=g.attrs["ignore_index"])
        if _row_parts(x, dim, attrs["reduction"]):
            return _cross_entropy_backward_by_parts(x, loss_gradient, target, weight, attrs)
        return nll_log_softmax_backward(out, loss_gradient, target, *weight, **attrs)
    return log_softmax_backward(g, out, dim=dim)


def _row_parts(x: Node, dim: tuple, reduction: str) -> bool:
    """Whether ``x`` is a concatenation of row blocks (``DataParallel``'s shards) under a
    log_softmax over classes, reduced to one loss."""
    return (x.op is cat and len(x.shape) == 2 and dim == (1,) and reduction != "none"
            and normalize_dim(x.attrs["dim"], 2) == 0
            and all(isinstance(part, Node) for part in x.inputs))


def _cross_entropy_backward_by_parts(x: Node, loss_gradient: Node, target: Node,
                                     weight: list, attrs: dict) -> Node:
    """Cross-entropy's gradient for logits concatenated from row blocks, block by block: each
    block's gradient needs its own logits (log_softmax is computed again for them, row by row
    the same numbers) and the whole target only for the mean's divisor, never the other
    blocks. So a shard's backward starts when its own forward ends, on its own worker,
    instead of waiting for every shard's logits to meet on one. ``cat``'s vjp hands each
    block its part without slicing."""
    parts, start = [], 0
    for part in x.inputs:
        stop = start + part.shape[0]
        parts.append(nll_log_softmax_backward(log_softmax_of(part, dim=attrs["dim"]),
                                              loss_gradient, target, *weight,
                                              rows=(start, stop), **attrs))
        start = stop
    return cat(*parts, dim=0)


log_softmax_of.defvjp(_log_softmax_vjp)


@primitive("log_softmax_backward", _gradient_shape, grad_name="LogSoftmaxBackwardBackward0")
def log_softmax_backward(g, result, *, dim):
    """``g - exp(result) * sum(g)``: log_softmax's gradient from its result."""
    return g - np.exp(result) * g.sum(axis=dim, keepdims=True)
log_softmax_backward.defvjp(
    lambda gg, out, g, result, dim: sub(gg, sum_(mul(gg, exp(result)), dim=dim, keepdim=True)),
    lambda gg, out, g, result, dim: neg(mul(mul(gg, exp(result)),
                                            sum_(g, dim=dim, keepdim=True))),
)


def _probabilities(p, target):
    if not isinstance(target, Node) or target.shape != p.shape:
        raise ShapeError(f"target size {shape_of(target)} must be the same as input size "
                         f"{p.shape}")
    return p.shape, result_dtype(p, target)


@primitive("binary_cross_entropy", _probabilities, grad_name="BinaryCrossEntropyBackward0")
def binary_cross_entropy(p, target):
    """Elementwise ``-(t log p + (1 - t) log(1 - p))`` with each log clamped at -100, as
    PyTorch computes it: a saturated probability (``sigmoid(20) == 1`` in float32) gives a
    finite loss and, through its vjp, a finite gradient."""
    if np.any((p < 0) | (p > 1)):
        raise RuntimeError("all elements of input should be between 0 and 1")
    return ((target - 1) * np.maximum(np.log1p(-p), -100)
            - target * np.maximum(np.log(p), -100))
binary_cross_entropy.defvjp(
    # PyTorch's formula: g (p - t) / max(p (1 - p), 1e-12), finite at p = 0 and p = 1.
    lambda g, out, p, t: div(mul(g, sub(p, t)), maximum(mul(sub(1.0, p), p), 1e-12)),
    lambda g, out, p, t: mul(g, sub(log1p(neg(p)), log(p))),  # unclamped, as PyTorch's
)


def _nll_shape(x, target, *weight, reduction, ignore_index):
    return (x.shape[:-1] if reduction == "none" else ()), x.dtype


def _class_weights(target, weight: tuple, ignore_index: int, dtype, classes: int) -> tuple:
    """Per target: its class (0 where ignored) and its weight (0 where ignored); ``None`` for
    weights when all are one (no ``weight``, nothing ignored): the common case stays cheap.
    A target outside ``[0, classes)`` that is not ignored raises, as in PyTorch."""
    ignored = target == ignore_index
    some_ignored = ignored.any()
    _check_indices(target[~ignored] if some_ignored else target, classes, "IndexError",
                   "Target {index} is out of bounds.")
    if not weight and not some_ignored:
        return target, None
    classes = np.where(ignored, 0, target)
    weights = weight[0][classes] if weight else np.ones(classes.shape, dtype)
    return classes, np.where(ignored, 0, weights).astype(dtype, copy=False)


@primitive("nll_loss", _nll_shape, grad_name="NllLossBackward0")
def nll_loss(x, target, *weight, reduction, ignore_index):
    """``-x[i, target[i]]`` (times its class's weight), reduced: one node where indexing,
    negation, sum and division made four, and five for the backward. ``mean`` divides by the
    targets' total weight (their count without ``weight``), as PyTorch does."""
    classes, weights = _class_weights(target, weight, ignore_index, x.dtype, x.shape[-1])
    picked = x[classes] if x.ndim == 1 else x[np.arange(classes.shape[0]), classes]
    losses = -picked if weights is None else -(picked * weights)
    if reduction == "none":
        return losses
    total = losses.sum()
    if reduction == "sum":
        return total
    return total / (classes.size if weights is None else weights.sum())
nll_loss.defvjp(lambda g, out, x, target, *weight, reduction, ignore_index: nll_loss_backward(
    g, target, *weight, shape=x.shape, reduction=reduction, ignore_index=ignore_index), None)


@primitive("nll_loss_backward", lambda g, target, *weight, shape, reduction, ignore_index:
           (shape, g.dtype), grad_name="NllLossBackwardBackward0")
def nll_loss_backward(g, target, *weight, shape, reduction, ignore_index):
    """nll_loss's gradient: ``-g`` (scaled as the forward reduced) at each target's class."""
    return _picked_gradient(g, target, weight, shape, reduction, ignore_index)


def _picked_gradient(g, target, weight: tuple, shape: tuple, reduction: str,
                     ignore_index: int, rows: tuple[int, int] | None = None) -> np.ndarray:
    """nll_loss's gradient, for the targets ``target[start:stop]`` if ``rows`` is given (the
    mean still divides by the whole target's weight)."""
    classes, weights = _class_weights(target, weight, ignore_index, g.dtype, shape[-1])
    scale = -g
    if reduction == "mean":
        total = classes.size if weights is None else weights.sum()
        # Every target ignored: no class gets a gradient (PyTorch's zeros), not -g / 0.
        scale = scale / total if total else np.zeros_like(scale)
    if rows is not None:
        classes = classes[rows[0]:rows[1]]
        weights = None if weights is None else weights[rows[0]:rows[1]]
    if weights is not None:
        scale = scale * weights
    out = np.zeros(shape, g.dtype)
    if len(shape) == 1:
        out[classes] = scale
    else:
        out[np.arange(shape[0]), classes] = scale
    return out
nll_loss_backward.defvjp(  # linear in g: its vjp is the forward applied to gg
    lambda gg, out, g, target, *weight, shape, reduction, ignore_index: nll_loss(
        gg, target, *weight, reduction=reduction, ignore_index=ignore_index), None)


@primitive("nll_log_softmax_backward", lambda result, g, target, *weight, dim, reduction,
           ignore_index, rows=None: (result.shape, result.dtype))
def nll_log_softmax_backward(result, g, target, *weight, dim, reduction, ignore_index,
                             rows=None):
    """``log_softmax_backward(nll_loss_backward(g, ...), result)``, the same numpy operations
    in one node: what a cross-entropy's backward records (never differentiated: a backward
    that builds a differentiable gradient records the pair). With ``rows=(start, stop)``,
    ``result`` holds those rows of the log-probabilities, and the gradient is theirs."""
    picked = _picked_gradient(g, target, weight, result.shape, reduction, ignore_index, rows)
    return log_softmax_backward.forward(picked, result, dim=dim)


def softmax(x: Node, dim: int) -> Node:
    x = _floating(x)
    return softmax_of(x, dim=normalize_dims(dim, len(x.shape)))


@primitive("softmax", _same, grad_name="SoftmaxBackward0")
def softmax_of(x, *, dim):
    """``exp(x - max) / sum`` as one node (the composite made six, and a dozen for its
    backward), with the same numpy operations in the same order."""
    shifted = np.exp(x - x.max(axis=dim, keepdims=True))
    return shifted / shifted.sum(axis=dim, keepdims=True)
softmax_of.defvjp(lambda g, out, x, dim: softmax_backward(g, out, dim=dim))


@primitive("softmax_backward", _gradient_shape, grad_name="SoftmaxBackwardDataBackward0")
def softmax_backward(g, result, *, dim):
    """``result * (g - sum(g * result))``: softmax's gradient from its result."""
    return result * (g - (g * result).sum(axis=dim, keepdims=True))
softmax_backward.defvjp(
    lambda gg, out, g, result, dim: softmax_backward(gg, result, dim=dim),
    lambda gg, out, g, result, dim: sub(
        sub(mul(gg, g), mul(g, sum_(mul(gg, result), dim=dim, keepdim=True))),
        mul(gg, sum_(mul(g, result), dim=dim, keepdim=True))),
)


def squeeze(x: Node, dim=None) -> Node:
    dims = normalize_dims(dim, len(x.shape))
    shape = tuple(n for i, n in enumerate(x.shape) if not (i in dims and n == 1))
    return shown_as(reshape(x, shape=shape), "SqueezeBackward0" if dim is None else
                    "SqueezeBackward1")


def unsqueeze(x: Node, dim: int) -> Node:
    d = normalize_dim(dim, len(x.shape) + 1)
    return shown_as(reshape(x, shape=x.shape[:d] + (1,) + x.shape[d:]), "UnsqueezeBackward0")


def flatten(x: Node, start_dim=0, end_dim=-1) -> Node:
    if not x.shape:
        return reshape(x, shape=(1,))
    a, b = normalize_dim(start_dim, len(x.shape)), normalize_dim(end_dim, len(x.shape))
    return reshape(x, shape=x.shape[:a] + (math.prod(x.shape[a:b + 1]),) + x.shape[b + 1:])


def stack(xs: list[Node], dim=0) -> Node:
    if not xs:
        raise RuntimeError("stack: expected a non-empty sequence of tensors")
    return stacked(*xs, dim=normalize_dim(dim, len(xs[0].shape) + 1))


def _stack_shape(*xs, dim):
    for x in xs[1:]:
        if x.shape != xs[0].shape:
            raise ShapeError(f"expects each tensor to be equal size, but got {xs[0].shape} and "
                             f"{x.shape}")
    return xs[0].shape[:dim] + (len(xs),) + xs[0].shape[dim:], result_dtype(*xs)


@primitive("stack", _stack_shape, grad_name="StackBackward0")
def stacked(*xs, dim):
    """One node for the whole stack (unsqueezing each input and a cat made 2n + 1), whose
    backward is one view of the gradient per input."""
    return np.stack(xs, axis=dim)
stacked.defvjp_of_many(lambda g, out, positions, *xs, dim: [
    index(g, spec=(slice(None),) * dim + (k,)) for k in positions])


def split(x: Node, split_size_or_sections, dim=0) -> list[Node]:
    d = normalize_dim(dim, len(x.shape))
    length = x.shape[d]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step < 0:
            raise RuntimeError(f"split expects split_size be non-negative, but got "
                               f"split_size={step}")
        if step == 0 and length != 0:
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got "
                               f"dimension size of {length}")
        step = max(step, 1)
        sizes = [min(step, length - s) for s in range(0, length, step)] or [0]
    else:
        sizes = list(split_size_or_sections)
        if sum(sizes) != length:
            raise RuntimeError(f"split: sizes {sizes} do not add up to {length}, "
                               f"the size of dimension {d}")
    pieces, start = [], 0
    for size in sizes:
        pieces.append(index(x, spec=(slice(None),) * d + (slice(start, start + size),)))
        start += size
    return pieces


def chunk(x: Node, chunks: int, dim=0) -> list[Node]:
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    length = x.shape[normalize_dim(dim, len(x.shape))]
    return split(x, max(-(-length // chunks), 1), dim)
