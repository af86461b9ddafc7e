"""``pargraph.autograd.graph``: the backward functions a tensor shows (``y.grad_fn``), and
PyTorch's hooks on the tensors a backward keeps.

PyTorch's ops save tensors for their backward, and these hooks see each one as it is saved
and used. pargraph's vjps read their forward nodes directly, whose values stay where the
step runs, so nothing is saved that a hook could move: ``save_on_cpu`` (the values are on
the CPU already) and ``disable_saved_tensors_hooks`` change nothing, and
``saved_tensors_hooks`` raises rather than ignore the user's functions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pargraph.graph import Node


class saved_tensors_hooks:  # noqa: N801 (PyTorch's name)
    """PyTorch's pack and unpack hooks for saved tensors: refused, since pargraph saves no
    tensors for a hook to see (a step's values stay on its threads or workers).

    Examples
    --------
    >>> import pargraph
    >>> try:
    ...     with pargraph.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
    ...         pass
    ... except NotImplementedError as error:
    ...     print("refused")
    refused
    """

    def __init__(self, pack_hook: Callable[[Any], Any], unpack_hook: Callable[[Any], Any]):
        self.pack_hook, self.unpack_hook = pack_hook, unpack_hook

    def __enter__(self) -> None:
        raise NotImplementedError(
            "autograd.graph.saved_tensors_hooks: pargraph's backward reads the forward's "
            "values where the step computed them and saves no tensors, so pack and unpack "
            "hooks would never be called; offloading is not needed on the CPU "
            "(save_on_cpu changes nothing), and recomputing is utils.checkpoint")

    def __exit__(self, *exc: Any) -> None:
        return None


class save_on_cpu:  # noqa: N801 (PyTorch's name)
    """PyTorch's offloading of saved tensors to the CPU: pargraph's values are on the CPU
    already, so it changes nothing.

    Examples
    --------
    >>> import pargraph
    >>> x = pargraph.ones(2, requires_grad=True)
    >>> with pargraph.autograd.graph.save_on_cpu(pin_memory=False):
    ...     y = (x * x).sum()
    >>> y.backward(); x.grad
    tensor([2., 2.])
    """

    def __init__(self, pin_memory: bool = False, device_type: str = "cuda") -> None:
        self.pin_memory, self.device_type = pin_memory, device_type

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


class disable_saved_tensors_hooks:  # noqa: N801 (PyTorch's name)
    """PyTorch's guard against saved-tensor hooks: there are none in pargraph to disable.

    Examples
    --------
    >>> import pargraph
    >>> with pargraph.autograd.graph.disable_saved_tensors_hooks("not here"):
    ...     pass
    """

    def __init__(self, error_message: str) -> None:
        self.error_message = error_message

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


class GradFn:
    """The backward function of a non-leaf tensor, as PyTorch shows it: of a class named
    after it (``type(y.grad_fn).__name__`` is ``"SumBackward0"``, which tools print)."""

    #: The subclass of each backward function's name, made once.
    kinds: dict[str, type] = {}

    def __init__(self, node: Node) -> None:
        self._node = node

    @classmethod
    def of(cls, node: Node) -> GradFn:
        name = node.backward_name()
        kind = cls.kinds.get(name)
        if kind is None:
            kind = cls.kinds[name] = type(name, (cls,), {"__module__": cls.__module__})
        return kind(node)

    def name(self) -> str:
        return self._node.backward_name()

    @property
    def next_functions(self) -> tuple:
        return tuple((grad_fn_of(i), 0) for i in self._node.input_nodes())

    def __repr__(self) -> str:
        return f"<{self.name()} object at {id(self):#x}>"


class AccumulateGrad:
    """Where a leaf's gradient ends up: ``variable`` is the leaf tensor."""

    def __init__(self, node: Node) -> None:
        self.variable = node.owner_tensor()

    def name(self) -> str:
        return "torch::autograd::AccumulateGrad"

    next_functions = ()


def grad_fn_of(node: Node) -> GradFn | AccumulateGrad | None:
    """The backward function that takes the gradient of ``node``'s value: its own, an
    accumulation into a leaf that requires grad, or None."""
    if node.history:
        return GradFn.of(node)
    return AccumulateGrad(node) if node.requires_grad else None
