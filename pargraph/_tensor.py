"""The Tensor class: PyTorch's names and semantics over lazily recorded nodes.

A Tensor wraps one :class:`~pargraph.graph.Node`. Operations record new nodes (shape errors
raise at once); values are realized on demand. In-place methods rebind the tensor to a new
node, so the graph itself never mutates.

Named ``_tensor`` (as PyTorch's ``torch/_tensor.py``) so that the module does not hide the
``pargraph.tensor`` factory. This module holds the class's core (its node, properties,
values, autograd, views and in-place rebinding); its methods by job are mixins in
:mod:`pargraph.methods` (operators, layout and dtype conversions, shapes, products, ...). The
rest of the facade, by concern: :mod:`pargraph.leaves` (data into leaf nodes),
:mod:`pargraph.factories` (new tensors, the random generator), :mod:`pargraph.functions`
(``cat``, ``stack``, ``compute``, function forms of methods), :mod:`pargraph.printing`
(``repr``),
:mod:`pargraph.collection` (dask's collection protocol), :mod:`pargraph.remote`
(``connect``). ``backward()`` calls into :mod:`pargraph.autograd`. Methods of primitives
declared with ``method=True`` (``exp``, ``relu``, ...) are added from the op registry.
"""

from __future__ import annotations

import functools
import math
import textwrap
import warnings
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from pargraph import autograd, dtypes, ops, spellings
from pargraph.autograd.backward_graph import accumulate
from pargraph.autograd.engine import post_accumulate_hooks
from pargraph.autograd.graph import GradFn
from pargraph.autograd.mode import no_grad
from pargraph.capturing import Symbol, recording
from pargraph.collection import DaskCollection
from pargraph.devices import device, strided
from pargraph.engine import execution
from pargraph.graph import REPLACED_OUTRIGHT, Node, grad_mode, keep_hooks, user_stacklevel
from pargraph.indexing import as_torch_key, index_spec, ints_first
from pargraph.leaves import leaf_of, legacy_leaf, scalar
from pargraph.methods import EverydayMethods
from pargraph.printing import format_tensor
from pargraph.remote.recovery import fetch
from pargraph.selection import SelectionMethods
from pargraph.shared_memory import shared_tensors

float16 = dtypes.dtype(np.float16)
bfloat16 = dtypes.dtype(ops.BFLOAT16)
float32 = dtypes.dtype(np.float32)
float64 = dtypes.dtype(np.float64)
int32 = dtypes.dtype(np.int32)
int64 = dtypes.dtype(np.int64)
bool_ = dtypes.dtype(bool)


class Size(tuple):
    """A tensor's shape: a tuple, with PyTorch's ``numel()``.

    Examples
    --------
    >>> import pargraph
    >>> s = pargraph.zeros(2, 3).shape
    >>> s == (2, 3), s.numel()
    (True, 6)
    """

    def numel(self) -> int:
        return int(np.prod(self, dtype=np.int64))

    def __repr__(self) -> str:
        return f"pargraph.Size({list(self)})"


class Tensor(DaskCollection, SelectionMethods, EverydayMethods):
    """A multi-dimensional array that records the operations applied to it.

    Create tensors with :func:`tensor` and the other factories.

    Examples
    --------
    >>> import pargraph
    >>> x = pargraph.tensor(5.0, requires_grad=True)
    >>> y = x ** 2
    >>> y
    tensor(25., grad_fn=<PowBackward0>)
    >>> y.backward(); x.grad
    tensor(10.)
    """

    __slots__ = ("_node", "_grad", "_changes", "__weakref__")
    __array_priority__ = 1000  # numpy defers to our reflected operators

    def __init__(self, node: Any = None, *more: int) -> None:
        if not isinstance(node, Node):  # PyTorch's legacy constructor: Tensor(data) is float32
            node = legacy_leaf(node, more)
        self._node = node
        self._grad: Tensor | None = None
        node.owner = weakref.ref(self)

    @property
    def grad(self) -> Tensor | None:
        """The gradient ``backward()`` accumulated into this tensor, or ``None`` (with
        PyTorch's warning on a computed tensor that does not retain its gradient)."""
        grad = self._grad
        if grad is None and self._node.history and not self._node.retains_grad:
            warnings.warn(NON_LEAF_GRAD, UserWarning, stacklevel=user_stacklevel())
        return grad

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        recorder = recording.recorder
        if recorder is not None:  # a compiled step sets it: it writes, maybe never reads it
            recorder.grad_set(self)
        self._grad = value

    @staticmethod
    def _operand(value: Any) -> Any:
        """``value`` as an op's input (see :func:`operand`)."""
        return operand(value)

    @staticmethod
    def _wrap(node: Node) -> Tensor:
        """A plain tensor around ``node`` (whatever subclass ``self`` is)."""
        return Tensor(node)

    def _accumulate_grad(self, g: Node, create_graph: bool) -> Node:
        """``self.grad += g`` (the autograd engine's :class:`GradTarget` interface): a new
        tensor the first time; later a fan-in node, in place (the same ``.grad`` object, as
        in PyTorch) unless the gradient itself is differentiable. Returns the new node."""
        if self.grad is None:
            self.grad = Tensor(g)
        elif create_graph:
            self.grad = Tensor(accumulate([self.grad._node, g]))
        else:
            recorder = recording.recorder
            if recorder is not None:  # the .grad object stays: its node changes
                recorder.grad_set(self)
            with no_grad():
                self.grad._rebind(accumulate([self.grad._node, g]))
        return self.grad._node

    # --- attributes ---------------------------------------------------------------------

    @property
    def shape(self) -> Size:
        return Size(self._node.shape)

    def size(self, dim: int | None = None):
        return self.shape if dim is None else self._node.shape[ops.normalize_dim(dim, self.ndim)]

    @property
    def dtype(self) -> dtypes.dtype:
        return dtypes.KNOWN.get(self._node.dtype) or self._node.dtype

    @property
    def ndim(self) -> int:
        return len(self._node.shape)

    def dim(self) -> int:
        return self.ndim

    def numel(self) -> int:
        return int(math.prod(self._node.shape))

    @property
    def requires_grad(self) -> bool:
        return self._node.requires_grad

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        self.requires_grad_(flag)

    @property
    def layout(self) -> Any:
        """``pargraph.strided``: values are dense arrays."""
        return strided

    @property
    def _version(self) -> int:
        """How many times an in-place op changed this tensor (PyTorch's version counter; a
        view counts its own changes)."""
        return getattr(self, "_changes", 0)

    @property
    def is_leaf(self) -> bool:
        return not self._node.history

    @property
    def grad_fn(self) -> GradFn | None:
        return GradFn.of(self._node) if self._node.history else None

    @property
    def T(self) -> Tensor:
        return self.permute(*reversed(range(self.ndim)))

    @property
    def mT(self) -> Tensor:
        if self._zero_d_transposed("Tensor.mT", "This function is the identity in these cases."):
            return self
        if self.ndim < 2:
            raise RuntimeError(f"tensor.mT is only supported on matrices or batches of "
                               f"matrices. Got {self.ndim}-D tensor.")
        dims = (*range(self.ndim - 2), self.ndim - 1, self.ndim - 2)
        return ShapedView(ops.mT(self._node), self, dims)

    def _zero_d_transposed(self, name: str, advice: str) -> bool:
        """Whether this is a 0-d tensor, which PyTorch's transposes return with a warning."""
        if self.ndim:
            return False
        warnings.warn(f"{name} is deprecated on 0-D tensors. {advice}", UserWarning,
                      stacklevel=user_stacklevel())
        return True

    @property
    def H(self) -> Tensor:
        """The conjugate transpose of a matrix (its transpose: tensors are real)."""
        if self._zero_d_transposed("Tensor.H", "Consider using x.conj()."):
            return self
        if self.ndim != 2:
            raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got "
                               f"{self.ndim}-D tensor."
                               + (" For batches of matrices, consider using tensor.mH"
                                  if self.ndim > 2 else ""))
        return self.mT

    @property
    def mH(self) -> Tensor:
        """The conjugate transpose of a matrix or of each of a batch of them."""
        return self._conjugate_transpose("Tensor.mH", "tensor.mH")

    def adjoint(self) -> Tensor:
        """``mH`` as a method (``torch.adjoint``)."""
        return self._conjugate_transpose("adjoint()", "tensor.adjoint()")

    def _conjugate_transpose(self, name: str, spelled: str) -> Tensor:
        """``mT`` (tensors are real), under PyTorch's checks of ``mH`` and ``adjoint``."""
        if self._zero_d_transposed(name, "Consider using x.conj()."):
            return self
        if self.ndim < 2:
            raise RuntimeError(f"{spelled} is only supported on matrices or batches of "
                               f"matrices. Got {self.ndim}-D tensor.")
        return self.mT

    @property
    def data(self) -> Tensor:
        """This tensor's data without its history, shared: ``p.data.add_(x)`` changes ``p``."""
        return self.detach()

    @data.setter
    def data(self, value: Tensor) -> None:
        value = value if isinstance(value, Tensor) else Tensor(leaf_of(value))
        if value.shape != self.shape or value.dtype != self.dtype:
            self._replace(_detached_node(value._node))  # PyTorch lets .data change shape
            return
        with no_grad():
            self._rebind(_detached_node(value._node))

    @property
    def device(self) -> device:
        return _CPU

    # --- values -------------------------------------------------------------------------

    def _value(self) -> np.ndarray:
        # The node read once: another thread may rebind this tensor meanwhile (an optimizer
        # step), and a detached tensor reads its base's node anew at every access.
        node = self._node
        recorder = recording.recorder
        if recorder is not None:  # a compiled step reads a value: a graph break
            recorder.read(node)
        execution.realize([node])
        if execution.local.observers:
            execution.observe_read(node)
        value = node.value
        return value if type(value) is np.ndarray else fetch(node)

    def share_memory_(self) -> Tensor:
        """Move the values into memory that processes started from now on (forked, or given
        the tensor through ``multiprocessing``) map too, so that their updates reach each
        other: Hogwild training (``model.share_memory()``). Returns the tensor.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(2).share_memory_().is_shared()
        True
        """
        if self._node.history:
            raise RuntimeError("share_memory_: only a tensor without autograd history (a "
                               "leaf, a parameter, a buffer) can be moved to shared memory")
        if shared_tensors.buffer_of(self) is None:
            shared_tensors.share(self, self._value())
        return self

    def is_shared(self) -> bool:
        """Whether the values are in shared memory (:meth:`share_memory_`).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(2).is_shared()
        False
        """
        return shared_tensors.buffer_of(self) is not None

    def numpy(self) -> np.ndarray:
        """The value as a numpy array (realizing it if needed).

        Examples
        --------
        >>> import pargraph
        >>> (pargraph.ones(2) * 3).numpy()
        array([3., 3.], dtype=float32)
        """
        if self.requires_grad:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. "
                               "Use tensor.detach().numpy() instead.")
        return self._value()

    def item(self) -> Any:
        """The value of a one-element tensor as a Python number.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([2.5]).item()
        2.5
        """
        if self.numel() != 1:
            raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted "
                               "to Scalar")
        return self._value().item()

    def tolist(self) -> Any:
        """The value as (nested) Python lists.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.arange(3).tolist()
        [0, 1, 2]
        """
        return self._value().tolist()

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        value = self.numpy()
        return value if dtype is None else value.astype(dtype)

    def __array_wrap__(self, array: np.ndarray, context: Any = None,
                       return_scalar: bool = False) -> Tensor:
        """A numpy ufunc's result on tensors as a tensor (``np.exp(t)``), booleans as uint8,
        as PyTorch's."""
        if array.dtype == bool:
            array = array.astype(np.uint8)
        return Tensor(leaf_of(np.asarray(array)))

    def __float__(self) -> float:
        if self.requires_grad:
            warnings.warn("Converting a tensor with requires_grad=True to a scalar may lead to "
                          "unexpected behavior.\nConsider using tensor.detach() first.",
                          UserWarning, stacklevel=user_stacklevel())
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self.dtype.kind not in "iub" or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted "
                            "to an index")
        return int(self.item())

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is "
                               "ambiguous")
        return bool(self.item())

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    __hash__ = object.__hash__

    def __format__(self, spec: str) -> str:
        if self.ndim == 0:  # as PyTorch: a 0-d tensor formats like its Python number
            return format(self.item(), spec)
        return object.__format__(self, spec)

    def __repr__(self) -> str:
        return format_tensor(self)

    # --- autograd -----------------------------------------------------------------------

    def detach(self) -> Tensor:
        """A tensor with the same data that is not part of the graph.

        As in PyTorch it shares the data: an in-place change of either tensor is seen by both.

        Examples
        --------
        >>> import pargraph
        >>> w = pargraph.ones(2, requires_grad=True)
        >>> (w * 2).detach().requires_grad
        False
        >>> d = w.detach(); _ = d.mul_(3); w
        tensor([3., 3.], requires_grad=True)
        """
        return SharedData(self)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Set ``requires_grad`` on a leaf tensor, in place.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(2).requires_grad_().requires_grad
        True
        """
        node = self._node
        if node.history and not requires_grad:
            raise RuntimeError("you can only change requires_grad flags of leaf variables. "
                               "If you want to use a computed variable in a subgraph that "
                               "doesn't require differentiation use var_no_grad = var.detach().")
        if requires_grad and not ops.is_floating(node.dtype) and node.dtype.kind != "c":
            raise RuntimeError("Only Tensors of floating point and complex dtype can require "
                               "gradients")
        if not node.history:
            node.requires_grad = bool(requires_grad)
        return self

    def register_hook(self, hook: Any) -> RemovableHandle:
        """Call ``hook(grad)`` when this tensor's gradient is computed; a tensor it returns
        replaces the gradient. The hook runs while ``backward()`` builds the graph and sees
        the gradient as a lazy tensor: what it computes joins the backward graph.

        Examples
        --------
        >>> import pargraph
        >>> x = pargraph.ones(2, requires_grad=True)
        >>> handle = x.register_hook(lambda grad: grad * 10)
        >>> (x * 3).sum().backward(); x.grad
        tensor([30., 30.])
        """
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        node = self._node
        if node.hooks is None:
            node.hooks = []
        node.hooks.append(hook)  # the handle removes it from this list, which a leaf keeps
        return RemovableHandle(node.hooks, hook)

    def register_post_accumulate_grad_hook(self, hook: Any) -> RemovableHandle:
        """Call ``hook(tensor)`` each time ``backward()`` has accumulated a gradient into this
        leaf's ``.grad`` (the hook may step an optimizer over it and clear it: an optimizer
        per parameter, run during the backward pass). As with ``register_hook``, the
        gradient is lazy when the hook sees it; reading it runs what it needs.

        Examples
        --------
        >>> import pargraph
        >>> w = pargraph.ones(2, requires_grad=True)
        >>> handle = w.register_post_accumulate_grad_hook(lambda t: print(t.grad.tolist()))
        >>> (w * 3).sum().backward()
        [3.0, 3.0]
        """
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if not self.is_leaf:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf "
                               "tensors")
        hooks = post_accumulate_hooks.of(self)
        hooks.append(hook)
        return RemovableHandle(hooks, hook)

    def retain_grad(self) -> None:
        """Keep ``.grad`` on this non-leaf tensor after ``backward()``.

        Examples
        --------
        >>> import pargraph
        >>> x = pargraph.ones(2, requires_grad=True); h = x * 2; h.retain_grad()
        >>> h.sum().backward(); h.grad
        tensor([1., 1.])
        """
        if not self.requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        self._node.retains_grad = True

    @property
    def retains_grad(self) -> bool:
        return self._node.retains_grad and self._node.history

    def backward(self, gradient: Tensor | None = None, retain_graph: bool | None = None,
                 create_graph: bool = False, inputs: Any = None) -> None:
        """Compute the gradient of this tensor with respect to the graph's leaves.

        The backward graph is built now; it runs, with the not-yet-realized part of the forward
        graph, at the next realization (reading a ``.grad``, ``item()``, ``optimizer.step()``),
        as one dask graph. Leaf ``.grad`` accumulates across calls; ``inputs``: into these
        tensors' only.

        Examples
        --------
        >>> import pargraph
        >>> x = pargraph.tensor([1.0, 2.0], requires_grad=True)
        >>> (x * x).sum().backward(); x.grad
        tensor([2., 4.])
        """
        autograd.backward([self], [gradient], retain_graph, create_graph, inputs=inputs)

    def __reduce_ex__(self, protocol: int) -> tuple:
        """Pickled as its values and ``requires_grad``, as PyTorch's tensors are (its graph
        stays behind; a view comes back as a tensor of its own)."""
        return _unpickled, (np.array(self.detach().numpy()), self.requires_grad)

    def __getitem__(self, key: Any) -> Tensor:
        if type(key) is tuple or type(key) is list:  # one int or slice needs neither
            key = as_torch_key(key, self.ndim, Tensor)
            split = ints_first(key, Tensor)
            if split is not None:  # PyTorch selects the ints first, then the rest
                return self[split[0]][split[1]]
        spec, index_nodes = index_spec(key, self.shape, Tensor)
        out = ops.index(self._node, *index_nodes, spec=spec)
        if index_nodes:
            return _wrap(out)
        ints = any(isinstance(item, (int, np.integer)) for item in spec)
        out = ops.shown_as(out, "SelectBackward0" if ints else "SliceBackward0")
        # Ints, slices, ``...`` and None give a view; index arrays and masks a copy, as in
        # PyTorch (an in-place change of the copy leaves this tensor as it is).
        basic = all(item is None or item is Ellipsis or type(item) is slice
                    or isinstance(item, (int, np.integer)) and not isinstance(item, bool)
                    for item in (key if type(key) is tuple else (key,)))
        return IndexedView(out, self, key) if basic else _wrap(out)

    # --- elementwise math (exp, log, ... come from the op registry: see below the class) -

    def clamp(self, min: Any = None, max: Any = None) -> Tensor:
        """Each element limited to ``[min, max]``: numbers, or tensors broadcast against
        this one (where ``min`` exceeds ``max`` the result is ``max``, as in PyTorch).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([0.0, 5.0]).clamp(max=pargraph.tensor([1.0, 4.0])).tolist()
        [0.0, 4.0]
        """
        tensors = [b for b in (min, max) if isinstance(b, Tensor)]
        if not any(b.ndim for b in tensors):
            return apply(ops.clamp, self._node, min=scalar(min), max=scalar(max))
        if min is not None and max is not None and len(tensors) == 1:
            raise TypeError("clamp() received an invalid combination of arguments - got "
                            f"(Tensor, min={type(min).__name__}, max={type(max).__name__}), "
                            "but expected min and max both numbers or both tensors")
        out = self
        if self.requires_grad:  # a NaN element passes no gradient, as PyTorch's mask says
            out = out.where(~out.isnan(), out.detach())
        if min is not None:
            out = out.where(~(out < min), min)
        if max is not None:
            out = out.where(~(out > max), max)
        return out

    # --- shapes (views; the other shape methods are methods.shapes') ----------------------

    def _viewed_by(self, result: Tensor, writer: Any) -> Tensor:
        """``result`` as a view of this tensor whose in-place changes ``writer(self, result)``
        writes back (see :class:`ScatteredView`)."""
        return ScatteredView(result._node, self, writer)

    def _shaped(self, node: Node, dims: tuple | None) -> Tensor:
        """``node``, a reshaping of this tensor (``dims``: its permutation, if it is one), as a
        view whose in-place changes reach this tensor (see :class:`ShapedView`)."""
        return ShapedView(node, self, dims)

    def _parts(self, nodes: list[Node], dim: int) -> tuple[Tensor, ...]:
        """Consecutive parts along ``dim`` as views: each one's in-place changes reach this
        tensor, as PyTorch's (``b.data.chunk(4)[1].fill_(1.0)``, an LSTM's forget gates)."""
        dim = ops.normalize_dim(dim, self.ndim)
        parts, start = [], 0
        for node in nodes:
            stop = start + node.shape[dim]
            parts.append(IndexedView(node, self, (slice(None),) * dim + (slice(start, stop),)))
            start = stop
        return tuple(parts)

    # --- in place (rebinding; the in-place forms are methods.in_place') -------------------

    def _rebind(self, node: Node, begun: int | None = None) -> Tensor:
        """Point this tensor at ``node``: how in-place ops work on an immutable graph.
        ``begun``: the uid from which nodes are the in-place op's own, whose use of the old
        value PyTorch allows (it keeps the original for the op). By default ``node`` alone,
        unless the old value is also one of its other operands (``h.mul_(h)``), which PyTorch
        saves as it is, and finds changed."""
        old = self._node
        if node.shape != old.shape:
            raise RuntimeError(f"output with shape {old.shape} doesn't match the broadcast "
                               f"shape {node.shape}")
        if node.dtype != old.dtype:
            ops.check_cast(node.dtype, old.dtype)
            node = ops.cast(node, dtype=old.dtype)
        if not old.history and old.requires_grad and not node.history:
            node.requires_grad = True  # an updated parameter stays a leaf that requires grad
        keep_hooks(old, node)
        recorder = recording.recorder
        if recorder is not None:
            recorder.rebound(self, old)
        if begun is None:
            begun = REPLACED_OUTRIGHT if any(i is old for i in node.inputs[1:]) \
                else node.uid
        old.overwritten = begun if old is not node else False
        self._node = node
        node.owner = weakref.ref(self)
        self._changes = getattr(self, "_changes", 0) + 1
        if shared_tensors and node.value is None and shared_tensors.buffer_of(self) is not None:
            execution.realize([node])  # shared memory changes at once, as PyTorch's does
        return self

    def _replace(self, node: Node) -> None:
        """Point this tensor at ``node`` of any shape and dtype (``.data = ``, ``Module.to``),
        keeping whether it is a leaf that requires grad."""
        old = self._node
        node.requires_grad = old.requires_grad and not old.history
        keep_hooks(old, node)
        recorder = recording.recorder
        if recorder is not None:
            recorder.rebound(self, old)
        old.overwritten = REPLACED_OUTRIGHT
        self._node = node
        node.owner = weakref.ref(self)

    def _check_in_place(self) -> None:
        if grad_mode.enabled and self._node.requires_grad and not self._node.history:
            raise RuntimeError("a leaf Variable that requires grad is being used in an "
                               "in-place operation.")

    def __setitem__(self, key: Any, value: Any) -> None:
        """``x[key] = value`` in place (ints, slices, masks, index tensors), as in PyTorch."""
        self._check_in_place()
        if type(key) is tuple or type(key) is list:
            key = as_torch_key(key, self.ndim, Tensor)
            split = ints_first(key, Tensor)
            if split is not None:  # into the view the ints select, as PyTorch orders dims
                self[split[0]][split[1]] = value
                return
        spec, index_nodes = index_spec(key, self.shape, Tensor)
        value = operand(value)
        if isinstance(value, Node) and value.dtype != self.dtype:
            value = ops.cast(value, dtype=self.dtype)
        self._rebind(ops.index_put(self._node, value, *index_nodes, spec=spec))

    def copy_(self, src: Any) -> Tensor:
        self._check_in_place()
        src = src if isinstance(src, Tensor) else Tensor(leaf_of(src))
        node = ops.expand(src._node, shape=self.shape) if src.shape != self.shape else src._node
        if node.dtype != self.dtype:
            node = ops.cast(node, dtype=self.dtype)
        if node is src._node:
            node = ops.clone(node)
        return self._rebind(node)


def _method_of(prim: ops.Primitive):
    def method(self: Tensor) -> Tensor:
        return apply(prim, self._node)

    method.__name__ = method.__qualname__ = prim.name
    method.__doc__ = (f"``{prim.name}`` of each element: the ``{prim.name}`` primitive "
                      "(see :mod:`pargraph.ops`).")
    return method


# A primitive declared with ``method=True`` is a Tensor method (and a ``pargraph.<name>``
# function, see :mod:`pargraph.functions`) without a line written for it here; the class
# lists them (``Tensor.REGISTRY_METHODS``, and its docstring's last paragraph).
Tensor.REGISTRY_METHODS = tuple(sorted(prim.name for prim in ops.REGISTRY.values()
                                       if prim.method))
for _name in Tensor.REGISTRY_METHODS:
    setattr(Tensor, _name, _method_of(ops.REGISTRY[_name]))
del _name
spellings.install(Tensor)  # ``axis=``/``keepdims=``, and 0-d tensors along dim 0
Tensor.__doc__ = (Tensor.__doc__ or "") + "\n" + textwrap.fill(
    "Methods made from the op registry (primitives declared with ``method=True`` in "
    ":mod:`pargraph.ops`): " + ", ".join(f"``{name}``" for name in Tensor.REGISTRY_METHODS)
    + ".", 92, initial_indent="    ", subsequent_indent="    ") + "\n"


def _unpickled(array: np.ndarray, requires_grad: bool) -> Tensor:
    """A tensor that was pickled: a leaf holding ``array``."""
    made = Tensor(leaf_of(array))
    if requires_grad:
        made.requires_grad_()
    return made


#: PyTorch's warning when ``.grad`` of a computed tensor is read.
NON_LEAF_GRAD = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
    "attribute won't be populated during autograd.backward(). If you indeed want the .grad "
    "field to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. "
    "If you access the non-leaf Tensor by mistake, make sure you access the leaf Tensor "
    "instead. See github.com/pytorch/pytorch/pull/30531 for more information.")


class _View(Tensor):
    """A tensor taken from ``base`` whose in-place changes reach ``base``, as a PyTorch view's
    do: each change is written back (:meth:`_write_back`), recorded as any in-place op is
    (autograd goes through it). Changes of the base made later do not show in the view."""

    __slots__ = ("_view_of", "_view_how")

    def __init__(self, node: Node, base: Tensor, how: Any) -> None:
        super().__init__(node)
        self._view_of, self._view_how = base, how

    def _rebind(self, node: Node, begun: int | None = None) -> Tensor:
        base = self._view_of
        base._check_in_place()  # refused on a leaf that requires grad before either changes
        super()._rebind(node, begun)
        self._write_back(base)
        return self

    def _write_back(self, base: Tensor) -> None:
        raise NotImplementedError  # pragma: no cover


class IndexedView(_View):
    """What basic indexing (ints, slices, ``...``, ``None``), ``split`` and ``chunk`` return
    (``w[0].zero_()``, ``init.normal_(w[:, :k])``): a change is written back with
    ``base[key] = view`` (``how``: the key)."""

    __slots__ = ()

    def _write_back(self, base: Tensor) -> None:
        base[self._view_how] = self


class ShapedView(_View):
    """What ``reshape``, ``view``, ``permute``, ``squeeze`` and ``unsqueeze`` (and the methods
    made of them: ``flatten``, ``T``, ``transpose``...) return (``x.view(-1).add_(1)``): every
    element of the base, rearranged, so a change is written back by rearranging the view's
    new value (``how``: the permutation it was taken with; None: a reshape)."""

    __slots__ = ()

    def _write_back(self, base: Tensor) -> None:
        dims = self._view_how
        back = ops.reshape(self._node, shape=tuple(base.shape)) if dims is None else \
            ops.permute(self._node, dims=tuple(int(d) for d in np.argsort(dims)))
        base._rebind(back)


class ScatteredView(_View):
    """What ``diagonal`` and ``view(dtype)`` return (``x.diagonal().zero_()``): a change is
    written back by a function of the base and the view's new value that gives the base's
    (``how``: that function, ``diagonal_scatter`` for a diagonal)."""

    __slots__ = ()

    def _write_back(self, base: Tensor) -> None:
        base._rebind(self._view_how(base, Tensor(self._node))._node)


class SharedData(Tensor):
    """What ``t.detach()`` and ``t.data`` return: ``t``'s data without its history, shared.

    Nodes never change, so sharing is done at the tensor level: reading this tensor reads
    ``t``'s current node (detached), and an in-place op on it rebinds ``t``. Either way both
    see every in-place change, as two PyTorch tensors sharing storage do.
    """

    __slots__ = ("_base", "_seen", "_leaf_requires_grad")

    def __init__(self, base: Tensor) -> None:
        while isinstance(base, SharedData):
            base = base._base
        self._base = base
        self._seen: tuple[Node, Node, int | None] | None = None
        self._leaf_requires_grad = False
        self._grad = None

    @property
    def _node(self) -> Node:
        base_node = self._base._node
        seen = self._seen
        # A capture makes its own node (one made before holds a value that the compiled
        # step's replays would not follow), the same one all through the capture.
        capture = id(recording.recorder) if recording.recorder is not None else None
        if seen is None or seen[0] is not base_node or seen[2] != capture:
            node = _detached_node(base_node)
            node.requires_grad = self._leaf_requires_grad
            node.owner = weakref.ref(self)
            self._seen = seen = (base_node, node, capture)
        return seen[1]

    @_node.setter
    def _node(self, node: Node) -> None:
        raise AssertionError("SharedData is rebound through its base")  # pragma: no cover

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        super().requires_grad_(requires_grad)  # checks the dtype
        self._leaf_requires_grad = bool(requires_grad)
        return self

    def _rebind(self, node: Node, begun: int | None = None) -> Tensor:
        if self._leaf_requires_grad or node.history:
            # It has a history of its own now: it stops sharing, as a PyTorch tensor whose
            # in-place op recorded autograd history would need its own storage for that.
            raise RuntimeError("an in-place operation on detached data must not record "
                               "autograd history; run it under pargraph.no_grad()")
        self._base._rebind(node, begun)
        return self

    def _replace(self, node: Node) -> None:
        self._base._replace(node)

    def share_memory_(self) -> Tensor:
        self._base.share_memory_()  # the data is its base's: the base moves
        return self

    def is_shared(self) -> bool:
        return self._base.is_shared()

    def __deepcopy__(self, memo: dict) -> Tensor:
        """A tensor of its own holding a copy of the values, as PyTorch's deepcopy of detached
        data (``copy.deepcopy(model.state_dict())``, a best model's snapshot)."""
        copied = Tensor(leaf_of(np.array(self._base.detach().numpy())))
        if self._leaf_requires_grad:
            copied.requires_grad_()
        memo[id(self)] = copied
        return copied

    def __copy__(self) -> SharedData:
        """Another tensor on the same data, as PyTorch's ``copy.copy`` of a tensor."""
        return SharedData(self._base)


def _detached_node(node: Node) -> Node:
    """A node with ``node``'s value and no history: its value if realized, else a
    ``stop_gradient`` node; always one while a compiled step captures, whose replays give
    ``node`` new values (a parameter, a random draw) that a constant would not follow."""
    if node.value is not None and recording.recorder is None:
        return ops.constant(node.value, shape=node.shape, dtype=node.dtype)
    with no_grad():
        return ops.stop_gradient(node)


_wrap = Tensor._wrap  # a plain tensor around a node, for the methods above


class RemovableHandle:
    """What registering a hook returns (on a tensor or a module): ``remove()`` unregisters
    the hook."""

    def __init__(self, hooks: list, hook: Any) -> None:
        self._hooks, self._hook = hooks, hook

    def remove(self) -> None:
        if self._hook in self._hooks:
            self._hooks.remove(self._hook)


_CPU = device("cpu")


def apply(op: ops.Primitive, *inputs: Any, **attrs: Any) -> Tensor:
    """``op`` recorded on ``inputs``, as a new Tensor: the facade's one way to apply a
    primitive (an in-place op then binds the result with ``Tensor._rebind``). A Tensor input
    passes its node, a list of tensors a list of their nodes; a node another op call made,
    and anything else (numbers, ``None``, shapes), passes as it is.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph import ops
    >>> from pargraph._tensor import apply
    >>> apply(ops.exp, pargraph.zeros(2))
    tensor([1., 1.])
    """
    return Tensor(op(*[value._node if isinstance(value, Tensor) else
                       _node_of(value) if type(value) is list else value for value in inputs],
                     **attrs))


#: The same door for the methods the mixins (``methods``, ``selection``, ``collection``) and
#: the autograd layer write as ``self._apply(op, ...)``: they cannot import this module.
Tensor._apply = staticmethod(apply)


def drawn(draw: Callable[[], np.ndarray], requires_grad: bool = False) -> Tensor:
    """A leaf holding ``draw()``, a draw from a random generator. A compiled step draws again
    at every replay, so that it takes the numbers an eager run would.

    Examples
    --------
    >>> import numpy as np
    >>> drawn(lambda: np.zeros(2, np.float32)).tolist()
    [0.0, 0.0]
    """
    t = apply(ops.constant, draw())
    if requires_grad:
        t.requires_grad_(True)
    recorder = recording.recorder
    if recorder is not None:
        recorder.random(t._node, draw)
    return t


#: Random leaves for the in-place fills of the mixins (``x.uniform_()``).
Tensor._drawn = staticmethod(drawn)


def attach_methods(**functions: Callable) -> None:
    """Give ``Tensor`` the method forms of functions implemented above it: ``x.allclose(y)``
    is ``pargraph.allclose(x, y)``. The module that implements a function attaches its
    method, so the class and its mixins never import a module above them. A name the class
    already has is refused.

    Examples
    --------
    >>> def halves(input): return input / 2
    >>> attach_methods(halves_example=halves)
    >>> Tensor([2.0]).halves_example().tolist()
    [1.0]
    >>> del Tensor.halves_example
    """
    for name, function in functions.items():
        if hasattr(Tensor, name):
            raise TypeError(f"Tensor already has {name!r}: attach_methods adds new methods")
        setattr(Tensor, name, function)


def _node_of(value: Any) -> Any:
    if isinstance(value, Tensor):
        return value._node
    if type(value) is list and value and isinstance(value[0], Tensor):
        return [t._node for t in value]
    return value


def operand(value: Any) -> Node | int | float | bool:
    """A Tensor's node, a Python scalar as it is (weak in type promotion), or a new leaf."""
    if isinstance(value, Tensor):
        return value._node
    if isinstance(value, (bool, int, float)) or type(value) is Symbol:
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (np.ndarray, list, tuple)):
        return leaf_of(value)
    raise TypeError(f"unsupported operand type: {type(value).__name__} (expected a Tensor, a "
                    "Python number, a numpy array or a list)")


#: Indexing's spec for the mixins' in-place writes (``index_put_``).
Tensor._index_spec = staticmethod(functools.partial(index_spec, tensor_type=Tensor))
