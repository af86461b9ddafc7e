"""``pargraph.nn.utils.parametrize``: PyTorch's parametrizations. A module's parameter or
buffer becomes a function of other tensors (``module.weight`` is computed from
``module.parametrizations.weight.original`` each time it is read), recorded into the graph
like any other op, so its gradient reaches the originals.

As in PyTorch, the module's class becomes a subclass (``ParametrizedLinear``) with a
property for each parametrized name, and ``state_dict`` keys become
``parametrizations.<name>.original`` (``original0``, ``original1``, ... when the first
parametrization's ``right_inverse`` returns several tensors).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator, Sequence
from typing import Any

from pargraph._tensor import Tensor
from pargraph.autograd.mode import no_grad
from pargraph.context import context
from pargraph.nn.module import Module, Parameter
from pargraph.nn.modules.container import ModuleDict, ModuleList


class _Cache:
    """The values of parametrized tensors inside :func:`cached` blocks (nested blocks share
    one cache, emptied when the outermost ends)."""

    def __init__(self) -> None:
        self.depth = 0
        self.values: dict[tuple[int, str], Tensor] = {}


_cache = context.register("parametrize_cache", _Cache())


@contextlib.contextmanager
def cached() -> Iterator[None]:
    """Compute each parametrized tensor once inside the block, as PyTorch's
    ``parametrize.cached()`` (for a weight read several times in one forward: an RNN's).

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.nn.utils import parametrize
    >>> layer = pargraph.nn.Linear(2, 2)
    >>> _ = parametrize.register_parametrization(layer, "weight", pargraph.nn.Identity())
    >>> with parametrize.cached():
    ...     layer.weight is layer.weight
    True
    """
    _cache.depth += 1
    try:
        yield
    finally:
        _cache.depth -= 1
        if not _cache.depth:
            _cache.values = {}


def _register_parameter_or_buffer(module: Module, name: str, value: Tensor) -> None:
    if isinstance(value, Parameter):
        module.register_parameter(name, value)
    else:
        module.register_buffer(name, value)


def _set(dest: Tensor, src: Tensor) -> None:
    """``dest`` holds ``src``'s value from now on, the same tensor object (an optimizer that
    holds it keeps updating it), as PyTorch's ``dest.set_(src)``."""
    with no_grad():
        dest.data = src.detach()


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, in registration order, and the tensors they start
    from: ``original``, or ``original0``, ``original1``, ... What
    ``module.parametrizations[name]`` is; calling it computes the parametrized tensor.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.nn.utils import parametrize
    >>> layer = parametrize.register_parametrization(
    ...     pargraph.nn.Linear(2, 2), "weight", pargraph.nn.Identity())
    >>> type(layer.parametrizations.weight).__name__
    'ParametrizationList'
    """

    def __init__(self, modules: Sequence[Module], original: Tensor,
                 unsafe: bool = False) -> None:
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        shape, dtype = original.shape, original.dtype
        with no_grad():
            new: Any = original
            for module in reversed(list(self)):
                if hasattr(module, "right_inverse"):
                    try:
                        new = module.right_inverse(new)
                    except NotImplementedError:
                        pass
        if not isinstance(new, (Tensor, Sequence)):
            raise ValueError("'right_inverse' must return a Tensor or a Sequence of tensors "
                             f"(list, tuple...). Got {type(new).__name__}")
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if new.dtype != dtype:
                raise ValueError("When `right_inverse` outputs one tensor, it may not change the "
                                 f"dtype.\noriginal.dtype: {dtype}\nright_inverse(original)"
                                 f".dtype: {new.dtype}")
            if new is not original:
                _set(original, new)
            _register_parameter_or_buffer(self, "original", original)
        else:
            for k, part in enumerate(new):
                if not isinstance(part, Tensor):
                    raise ValueError("'right_inverse' must return a Tensor or a Sequence of "
                                     f"tensors (list, tuple...). Got element {k} of the "
                                     f"sequence with type {type(part).__name__}.")
                if isinstance(original, Parameter):
                    part = Parameter(part, original.requires_grad)
                else:
                    part = part.detach().requires_grad_(original.requires_grad)
                _register_parameter_or_buffer(self, f"original{k}", part)
        if not self.unsafe:
            made = self()
            if not isinstance(made, Tensor):
                raise ValueError(f"A parametrization must return a tensor. Got "
                                 f"{type(made).__name__}.")
            if made.dtype != dtype:
                raise ValueError("Registering a parametrization may not change the dtype of the "
                                 "tensor, unless `unsafe` flag is enabled.\nunparametrized "
                                 f"dtype: {dtype}\nparametrized dtype: {made.dtype}")
            if made.shape != shape:
                raise ValueError("Registering a parametrization may not change the shape of the "
                                 "tensor, unless `unsafe` flag is enabled.\nunparametrized "
                                 f"shape: {shape}\nparametrized shape: {made.shape}")

    def right_inverse(self, value: Tensor) -> None:
        """Store ``value`` as the parametrized tensor: each parametrization's
        ``right_inverse``, last registered first, gives the originals (what assigning
        ``module.weight = value`` does)."""
        with no_grad():
            for module in reversed(list(self)):
                if not hasattr(module, "right_inverse"):
                    raise RuntimeError(f"parametrization {type(module).__name__} does not "
                                       "implement right_inverse.")
                value = module.right_inverse(value)
            if self.is_tensor:
                if not isinstance(value, Tensor):
                    raise ValueError(f"`right_inverse` should return a tensor. Got "
                                     f"{type(value).__name__}")
                if value.dtype != self.original.dtype:
                    raise ValueError(f"The tensor returned by `right_inverse` has dtype "
                                     f"{value.dtype} while `original` has dtype "
                                     f"{self.original.dtype}")
                _set(self.original, value)
                return
            if not isinstance(value, Sequence):
                raise ValueError("'right_inverse' must return a sequence of tensors. Got "
                                 f"{type(value).__name__}.")
            if len(value) != self.ntensors:
                raise ValueError("'right_inverse' must return a sequence of tensors of length "
                                 f"{self.ntensors}. Got a sequence of length {len(value)}.")
            for k, part in enumerate(value):
                original = getattr(self, f"original{k}")
                if not isinstance(part, Tensor):
                    raise ValueError("'right_inverse' must return a sequence of tensors. Got "
                                     f"element {k} of type {type(part).__name__}.")
                if part.dtype != original.dtype:
                    raise ValueError(f"Tensor {k} returned by `right_inverse` has dtype "
                                     f"{part.dtype} while `original{k}` has dtype "
                                     f"{original.dtype}")
                _set(original, part)

    def forward(self) -> Tensor:
        parametrizations = list(self)
        if self.is_tensor:
            value = parametrizations[0](self.original)
        else:
            value = parametrizations[0](*(getattr(self, f"original{k}")
                                          for k in range(self.ntensors)))
        for parametrization in parametrizations[1:]:
            value = parametrization(value)
        return value


def _deepcopy(self: Module, memo: dict) -> Module:
    """A parametrized module's deep copy (its ``__getstate__`` refuses pickling)."""
    found = memo.get(id(self))
    if found is not None:
        return found
    replica = self.__new__(type(self))
    memo[id(self)] = replica
    object.__setattr__(replica, "__dict__", copy.deepcopy(self.__dict__, memo))
    return replica


def _refuse_pickling(self: Module) -> None:
    raise RuntimeError("Serialization of parametrized modules is only supported through "
                       "state_dict(). See:\nhttps://pytorch.org/tutorials/beginner/"
                       "saving_loading_models.html#saving-loading-a-general-checkpoint-for-"
                       "inference-and-or-resuming-training")


def _parametrized_class(module: Module) -> None:
    """Give ``module`` a class of its own, a subclass of its class, to hold the properties of
    its parametrized tensors (PyTorch's ``Parametrized<Class>``)."""
    cls = type(module)
    namespace: dict[str, Any] = {"__getstate__": _refuse_pickling}
    if not hasattr(cls, "__deepcopy__"):
        namespace["__deepcopy__"] = _deepcopy
    object.__setattr__(module, "__class__", type(f"Parametrized{cls.__name__}", (cls,), namespace))


def _add_property(module: Module, name: str) -> None:
    """``module.<name>``: the parametrized tensor, computed when read (once per
    :func:`cached` block); assigning it stores a value through ``right_inverse``."""
    def get(self: Module) -> Tensor:
        parametrizations = self.parametrizations[name]
        if not _cache.depth:
            return parametrizations()
        key = (id(self), name)
        value = _cache.values.get(key)
        if value is None:
            value = _cache.values[key] = parametrizations()
        return value

    def set(self: Module, value: Tensor) -> None:
        self.parametrizations[name].right_inverse(value)

    setattr(type(module), name, property(get, set))


def register_parametrization(module: Module, tensor_name: str, parametrization: Module, *,
                             unsafe: bool = False) -> Module:
    """Make ``module.<tensor_name>`` the output of ``parametrization`` (a Module) applied to
    the original tensor, as ``torch.nn.utils.parametrize.register_parametrization``. A second
    parametrization of the same name applies to the first one's output. Returns ``module``.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.nn.utils import parametrize
    >>> class Symmetric(pargraph.nn.Module):
    ...     def forward(self, x):
    ...         return x.triu() + x.triu(1).transpose(-1, -2)
    >>> layer = parametrize.register_parametrization(pargraph.nn.Linear(3, 3), "weight",
    ...                                              Symmetric())
    >>> bool((layer.weight == layer.weight.T).all())
    True
    >>> sorted(layer.state_dict())
    ['bias', 'parametrizations.weight.original']
    """
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            _check_appended(module, tensor_name, parametrization)
        parametrizations = module.parametrizations[tensor_name]
        parametrizations.append(parametrization)
        parametrizations.unsafe |= unsafe
    elif tensor_name in module._buffers or tensor_name in module._parameters:
        original = getattr(module, tensor_name)
        parametrizations = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _parametrized_class(module)
            module.parametrizations = ModuleDict()
        _add_property(module, tensor_name)
        module.parametrizations[tensor_name] = parametrizations
    else:
        raise ValueError(f"Module '{module}' does not have a parameter, a buffer, or a "
                         f"parametrized element with name '{tensor_name}'")
    return module


def _check_appended(module: Module, name: str, parametrization: Module) -> None:
    """PyTorch's checks of a parametrization added to a parametrized tensor: it keeps the
    tensor's dtype and shape, and so does its ``right_inverse``."""
    before = getattr(module, name)
    after = parametrization(before)
    if not isinstance(after, Tensor):
        raise ValueError(f"A parametrization must return a tensor. Got {type(after).__name__}.")
    if after.dtype != before.dtype:
        raise ValueError("Registering a parametrization may not change the dtype of the tensor, "
                         f"unless the `unsafe` flag is enabled.\nmodule.{name}.dtype: "
                         f"{before.dtype}\nparametrization(module.{name}).dtype: {after.dtype}")
    if after.shape != before.shape:
        raise ValueError("Registering a parametrization may not change the shape of the tensor, "
                         f"unless the `unsafe` flag is enabled.\nmodule.{name}.shape: "
                         f"{before.shape}\nparametrization(module.{name}).shape: {after.shape}")
    if not hasattr(parametrization, "right_inverse"):
        return
    try:
        back = parametrization.right_inverse(after)
    except NotImplementedError:
        return
    if not isinstance(back, Tensor):
        raise ValueError(f"parametrization.right_inverse must return a tensor. Got: "
                         f"{type(back).__name__}")
    if back.dtype != before.dtype:
        raise ValueError("The tensor returned by parametrization.right_inverse must have the "
                         f"same dtype as module.{name}, unless the `unsafe` flag is enabled.\n"
                         f"module.{name}.dtype: {before.dtype}\nreturned dtype: {back.dtype}")
    if back.shape != before.shape:
        raise ValueError("The tensor returned by parametrization.right_inverse must have the "
                         f"same shape as module.{name}, unless the `unsafe` flag is enabled.\n"
                         f"module.{name}.shape: {before.shape}\nreturned shape: {back.shape}")


def is_parametrized(module: Module, tensor_name: str | None = None) -> bool:
    """Whether ``module`` has a parametrization (of ``tensor_name``, or of any tensor).

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.nn.utils import parametrize
    >>> parametrize.is_parametrized(pargraph.nn.Linear(2, 2))
    False
    """
    parametrizations = getattr(module, "parametrizations", None)
    if not isinstance(parametrizations, ModuleDict):
        return False
    return len(parametrizations) > 0 if tensor_name is None else tensor_name in parametrizations


def remove_parametrizations(module: Module, tensor_name: str,
                            leave_parametrized: bool = True) -> Module:
    """Make ``tensor_name`` a plain parameter or buffer again, holding its parametrized value
    (``leave_parametrized``) or its original; the module gets its class back when nothing of
    it is parametrized any more. Returns ``module``.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.nn.utils import parametrize
    >>> layer = parametrize.register_parametrization(pargraph.nn.Linear(2, 2), "weight",
    ...                                              pargraph.nn.Identity())
    >>> type(parametrize.remove_parametrizations(layer, "weight")).__name__
    'Linear'
    """
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    parametrizations = module.parametrizations[tensor_name]
    if parametrizations.is_tensor:
        original = parametrizations.original
        if leave_parametrized:
            with no_grad():
                _set(original, getattr(module, tensor_name))
    elif leave_parametrized:
        value = getattr(module, tensor_name)
        original = Parameter(value.detach()) if value.requires_grad else value.detach()
    else:
        raise ValueError("Cannot leave unparametrized (`leave_parametrized=False`) a tensor "
                         "that is parametrized in terms of a sequence of tensors.")
    delattr(type(module), tensor_name)
    del module.parametrizations[tensor_name]
    _register_parameter_or_buffer(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        object.__setattr__(module, "__class__", type(module).__bases__[0])
    return module


def type_before_parametrizations(module: Module) -> type:
    """``module``'s class before it was parametrized (its class if it is not).

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.nn.utils import parametrize
    >>> layer = parametrize.register_parametrization(pargraph.nn.Linear(2, 2), "weight",
    ...                                              pargraph.nn.Identity())
    >>> parametrize.type_before_parametrizations(layer).__name__
    'Linear'
    """
    return type(module).__bases__[0] if is_parametrized(module) else type(module)
