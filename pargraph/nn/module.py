"""``Module`` and ``Parameter``: registration by attribute, dotted names, state dicts."""

from __future__ import annotations

import functools
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import numpy as np

from pargraph import ops
from pargraph._tensor import RemovableHandle, Size, Tensor
from pargraph.autograd.engine import zero_grads
from pargraph.autograd.mode import no_grad
from pargraph.capturing import recording
from pargraph.context import context
from pargraph.factories import as_tensor, empty_for_init
from pargraph.graph import grad_mode, in_package, naming_state, user_site
from pargraph.interrupts import interrupts
from pargraph.methods.layout import dtype_of_to
from pargraph.nn.hooks import BackwardHooks, ForwardHook


class IncompatibleKeys(NamedTuple):
    """What ``load_state_dict`` returns: the keys it did not find, and those it did not use."""

    missing_keys: list[str]
    unexpected_keys: list[str]

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return (f"_IncompatibleKeys(missing_keys={self.missing_keys}, "
                f"unexpected_keys={self.unexpected_keys})")


def _typename(value: Any) -> str:
    """PyTorch's ``torch.typename``: ``torch.FloatTensor`` for a tensor, else the class."""
    if isinstance(value, Tensor):
        return value.type()
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"


class Parameter(Tensor):
    """A tensor that a Module registers as a learnable parameter (``requires_grad=True``).

    Examples
    --------
    >>> import pargraph
    >>> p = pargraph.nn.Parameter(pargraph.zeros(2))
    >>> p.requires_grad, p.is_leaf
    (True, True)
    """

    def __init__(self, data: Any = None, requires_grad: bool = True) -> None:
        data = as_tensor(np.zeros(0, np.float32) if data is None else data)
        value = data.detach()._value()
        super().__init__(ops.constant(value))
        self.requires_grad_(requires_grad)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, protocol: int):
        return Parameter, (self.detach().numpy(), self.requires_grad)


class Buffer(Tensor):
    """A tensor that a Module registers as a buffer when it is assigned as the module's
    attribute: state that is not a parameter, in ``state_dict`` unless ``persistent=False``.

    Examples
    --------
    >>> import pargraph
    >>> class Counter(pargraph.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.count = pargraph.nn.Buffer(pargraph.zeros(()))
    >>> list(Counter().state_dict())
    ['count']
    """

    def __init__(self, data: Any = None, *, persistent: bool = True) -> None:
        data = as_tensor(np.zeros(0, np.float32) if data is None else data)
        super().__init__(data.detach()._node)
        self.requires_grad_(data.requires_grad)
        self.persistent = persistent


def _converted(value: Any, target: Tensor) -> np.ndarray:
    """``value`` as a new numpy array of ``target``'s dtype, or a TypeError saying why not."""
    array = value.detach()._value() if isinstance(value, Tensor) else np.asarray(value)
    if array.dtype.kind not in "biuf" and not ops.is_floating(array.dtype):
        raise TypeError(f"expected a tensor or a numeric array, got {type(value).__name__} "
                        f"of dtype {array.dtype}")
    return array.astype(target.dtype, copy=True)


def assign(t: Tensor, value: Any) -> None:
    """Replace the value of a leaf tensor (a parameter), keeping ``requires_grad``."""
    array = np.array(value, dtype=t.dtype, copy=True)
    if array.shape != t.shape:
        raise RuntimeError(f"cannot assign a value of shape {array.shape} to a tensor of shape "
                           f"{t.shape}")
    with no_grad():
        t._rebind(ops.constant(array))


class Module:
    """Base class of layers and models, as in PyTorch.

    Assigning a Parameter or a Module to an attribute registers it; ``named_parameters`` gives
    dotted names such as ``layer1.weight`` or ``0.bias``.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph import nn
    >>> class Net(nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.fc = nn.Linear(2, 1)
    ...     def forward(self, x):
    ...         return self.fc(x)
    >>> [name for name, _ in Net().named_parameters()]
    ['fc.weight', 'fc.bias']
    """

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers_set", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parent", None)
        object.__setattr__(self, "_name_in_parent", None)
        object.__setattr__(self, "_forward_hooks", [])
        object.__setattr__(self, "_forward_pre_hooks", [])
        object.__setattr__(self, "_load_state_dict_pre_hooks", [])
        object.__setattr__(self, "_pargraph_scope", (-1, ""))  # (tree version, scope of its ops)

    def __getstate__(self) -> dict:
        """What pickle keeps (``pargraph.save(model, path)``, ``copy.deepcopy``): everything but
        the link to a parent module, a weak reference the parent's own state restores."""
        state = dict(self.__dict__)
        state["_parent"] = None
        state["_pargraph_scope"] = (-1, "")
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        for name, module in self._modules.items():
            if module is not None and module._parent is None:
                object.__setattr__(module, "_parent", weakref.ref(self))
                object.__setattr__(module, "_name_in_parent", name)

    # --- registration -------------------------------------------------------------------

    def __setattr__(self, name: str, value: Any) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign to a Module before Module.__init__() is called")
        # PyTorch's rules: a Parameter or a Module registers under the name (and replaces what
        # was there); a registered name takes only its own kind or None, and a buffer stays a
        # buffer when a tensor is assigned to it (``self.steps += 1``).
        params, buffers, modules = self._parameters, self._buffers, self._modules
        if name == "training":
            versions.modes += 1
        if name in params or name in modules or isinstance(value, (Parameter, Module, Buffer)):
            self._registry_changed()
        elif name in buffers:
            recorder = recording.recorder
            if recorder is not None:  # a compiled step writes the buffer
                recorder.buffer_set(self, name)
            else:
                self._registry_changed()
        if isinstance(value, Parameter):
            self.__dict__.pop(name, None)
            buffers.pop(name, None)
            modules.pop(name, None)
            params[name] = value
        elif isinstance(value, Buffer):
            self.__dict__.pop(name, None)
            params.pop(name, None)
            modules.pop(name, None)
            buffers[name] = value
            if value.persistent:
                self._non_persistent_buffers_set.discard(name)
            else:
                self._non_persistent_buffers_set.add(name)
        elif name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as parameter '{name}' "
                                "(torch.nn.Parameter or None expected)")
            params[name] = None
        elif isinstance(value, Module):
            self.__dict__.pop(name, None)
            params.pop(name, None)
            buffers.pop(name, None)
            modules[name] = value
            if value._parent is None:
                object.__setattr__(value, "_parent", weakref.ref(self))
                object.__setattr__(value, "_name_in_parent", name)
                versions.tree += 1  # paths below ``value`` changed
        elif name in modules:
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as child module '{name}' "
                                "(torch.nn.Module or None expected)")
            modules[name] = None
        elif name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{_typename(value)}' as buffer '{name}' "
                                "(torch.Tensor or None expected)")
            buffers[name] = value
        else:
            recorder = recording.recorder
            if recorder is not None and isinstance(value, Tensor):  # a compiled step writes
                recorder.attribute_set(self, name)  # it: each replay sets it again
            versions.attributes += 1
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        for registry in ("_parameters", "_buffers", "_modules"):
            found = self.__dict__.get(registry, {})
            if name in found:
                return found[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for registry in (self._parameters, self._buffers, self._modules):
            if name in registry:
                del registry[name]
                self._registry_changed()
                return
        object.__delattr__(self, name)

    def _weight_and_bias(self, weight_shape: tuple, bias_features: int, bias: bool,
                         dtype: Any) -> None:
        """A layer's ``weight`` and (with ``bias``) ``bias`` parameters, filled by its
        ``reset_parameters()`` and cast to ``dtype``: what Linear, Bilinear and the
        convolutions make."""
        self.weight = Parameter(empty_for_init(*weight_shape))
        if bias:
            self.bias = Parameter(empty_for_init(bias_features))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()
        if dtype is not None:
            self.to(dtype)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Register ``param`` (a Parameter, or None for a declared but absent one)."""
        self._check_new_name(name, self._parameters)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{_typename(param)}' object to parameter '{name}' "
                            "(torch.nn.Parameter or None required)")
        self.__dict__.pop(name, None)
        self._parameters[name] = param
        self._registry_changed()

    def register_buffer(self, name: str, tensor: Tensor | None,
                        persistent: bool = True) -> None:
        """Register a tensor that is state but not a parameter (in ``state_dict`` unless not
        ``persistent``)."""
        self._check_new_name(name, self._buffers)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{_typename(tensor)}' object to buffer '{name}' "
                            "(torch Tensor or None required)")
        self.__dict__.pop(name, None)
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)
        self._registry_changed()

    def _registry_changed(self) -> None:
        """A parameter, buffer or child of a module a compiled step called was assigned: the
        step captures again (it holds the old ones)."""
        if self.__dict__.get("_pargraph_captured"):
            versions.registry += 1

    def _check_new_name(self, name: Any, registry: dict) -> None:
        """PyTorch's checks of a name to register in ``registry``."""
        if not isinstance(name, str):
            raise TypeError(f"name should be a string. Got {type(name).__name__}")
        if "." in name:
            raise KeyError('name can\'t contain "."')
        if name == "":
            raise KeyError('name can\'t be empty string ""')
        if name not in registry and (name in self.__dict__ or any(
                name in other for other in (self._parameters, self._buffers, self._modules))):
            raise KeyError(f"attribute '{name}' already exists")

    def add_module(self, name: str, module: Module | None) -> None:
        if module is None:
            self._modules[name] = None
        else:
            setattr(self, name, module)

    def _set_children(self, children: list[tuple[str, Module | None]]) -> None:
        """Replace the children by ``children`` (names and modules, in order): what
        deleting from or inserting into a Sequential or ModuleList does, renumbering."""
        for name, module in children:
            if module is not None and (module._parent is None or module._parent() is self):
                object.__setattr__(module, "_parent", weakref.ref(self))
                object.__setattr__(module, "_name_in_parent", name)
        self._modules.clear()
        self._modules.update(children)
        versions.tree += 1  # paths below the children changed
        self._registry_changed()

    def register_module(self, name: str, module: Module | None) -> None:
        """``add_module``, by its other name."""
        self.add_module(name, module)

    def set_submodule(self, target: str, module: Module, strict: bool = False) -> None:
        """Put ``module`` at the dotted path ``target`` (``"encoder.layers.0"``); with
        ``strict``, only where a submodule is already.

        Examples
        --------
        >>> import pargraph
        >>> net = pargraph.nn.Sequential(pargraph.nn.Linear(2, 2), pargraph.nn.ReLU())
        >>> net.set_submodule("1", pargraph.nn.Tanh()); type(net[1]).__name__
        'Tanh'
        """
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        *path, name = target.split(".")
        parent = self.get_submodule(".".join(path)) if path else self
        if strict and not isinstance(parent._modules.get(name), Module):
            raise AttributeError(f"{parent._get_name()} has no attribute `{name}`")
        if not isinstance(module, Module):
            raise TypeError(f"`module` is not an nn.Module, found {type(module)}")
        parent.add_module(name, module)

    def _get_name(self) -> str:
        return type(self).__name__

    def get_extra_state(self) -> Any:
        """What this module adds to its ``state_dict`` under ``_extra_state`` (override it
        with ``set_extra_state``)."""
        raise RuntimeError("Reached a code path in Module.get_extra_state() that should never "
                           "be called. Please file an issue at https://github.com/pytorch/"
                           "pytorch/issues/new?template=bug-report.yml to report this bug.")

    def set_extra_state(self, state: Any) -> None:
        """Restore what ``get_extra_state`` returned, from a ``state_dict``."""
        raise RuntimeError("Reached a code path in Module.set_extra_state() that should never "
                           "be called. Please file an issue at https://github.com/pytorch/"
                           "pytorch/issues/new?template=bug-report.yml to report this bug.")

    def _has_extra_state(self) -> bool:
        return type(self).get_extra_state is not Module.get_extra_state

    def share_memory(self) -> Module:
        """Move every parameter and buffer into shared memory (``Tensor.share_memory_``), for
        Hogwild training with ``torch.multiprocessing``; the module.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.nn.Linear(2, 1).share_memory().weight.is_shared()
        True
        """
        for tensor in [*self.parameters(), *self.buffers()]:
            tensor.share_memory_()
        return self

    def to_empty(self, *, device: Any = None, recurse: bool = True) -> Module:
        """PyTorch's move of a module to ``device`` without its values: on the CPU the values
        stay, which any content of uninitialized memory may be; the module."""
        return self

    def cuda(self, device: Any = None) -> Module:
        """No CUDA here: raises, as PyTorch built without CUDA does."""
        raise AssertionError("Torch not compiled with CUDA enabled (pargraph computes on the "
                             "CPU; drop .cuda() or use .to(device) with a CPU device)")

    def path(self) -> str:
        """This module's dotted name inside the model that holds it (``""`` at the top)."""
        names, module = [], self
        while module._parent is not None and module._parent() is not None:
            names.append(module._name_in_parent)
            module = module._parent()
        return ".".join(reversed(names))

    # --- traversal ----------------------------------------------------------------------

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        seen: set[int] = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) \
            if recurse else [(prefix, self)]
        for module_prefix, module in modules:
            for name, param in module._parameters.items():
                if param is None or (remove_duplicate and id(param) in seen):
                    continue
                seen.add(id(param))
                yield (f"{module_prefix}.{name}" if module_prefix else name), param

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        seen: set[int] = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) \
            if recurse else [(prefix, self)]
        for module_prefix, module in modules:
            for name, buffer in module._buffers.items():
                if buffer is None or (remove_duplicate and id(buffer) in seen):
                    continue
                seen.add(id(buffer))
                yield (f"{module_prefix}.{name}" if module_prefix else name), buffer

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, buffer in self.named_buffers(recurse=recurse):
            yield buffer

    def named_children(self) -> Iterator[tuple[str, Module]]:
        for name, module in self._modules.items():
            if module is not None:
                yield name, module

    def children(self) -> Iterator[Module]:
        for _, module in self.named_children():
            yield module

    def named_modules(self, memo: set | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Module]]:
        seen: set[int] = set()
        stack = [(prefix, self)]
        while stack:
            name, module = stack.pop()
            if remove_duplicate:
                if id(module) in seen or (memo is not None and module in memo):
                    continue
                seen.add(id(module))
                if memo is not None:
                    memo.add(module)
            yield name, module
            children = [(f"{name}.{child_name}" if name else child_name, child)
                        for child_name, child in module.named_children()]
            stack.extend(reversed(children))

    def modules(self) -> Iterator[Module]:
        for _, module in self.named_modules():
            yield module

    # --- modes and gradients ------------------------------------------------------------

    def to(self, *args: Any, **kwargs: Any) -> Module:
        """Convert parameters and buffers to a dtype, in place (``"cpu"`` is accepted as the
        device; a tensor argument gives its dtype). Returns the module, as in PyTorch.

        Examples
        --------
        >>> import pargraph
        >>> layer = pargraph.nn.Linear(2, 1).to("cpu", dtype=pargraph.float64)
        >>> layer.weight.dtype
        pargraph.float64
        """
        dtype = dtype_of_to(args, kwargs, "Module.to")
        if dtype is not None:
            self._cast_floats(np.dtype(dtype))
        return self

    def cpu(self) -> Module:
        return self

    def float(self) -> Module:
        return self._cast_floats(np.dtype(np.float32))

    def double(self) -> Module:
        return self._cast_floats(np.dtype(np.float64))

    def half(self) -> Module:
        """Cast the floating point parameters and buffers to float16."""
        return self._cast_floats(np.dtype(np.float16))

    def bfloat16(self) -> Module:
        """Cast the floating point parameters and buffers to bfloat16."""
        return self._cast_floats(ops.BFLOAT16)

    def get_submodule(self, target: str) -> Module:
        """The submodule at the dotted path ``target`` (``""``: this module).

        Examples
        --------
        >>> import pargraph
        >>> net = pargraph.nn.Sequential(pargraph.nn.Linear(2, 2), pargraph.nn.ReLU())
        >>> type(net.get_submodule("1")).__name__
        'ReLU'
        """
        module = self
        for name in target.split(".") if target else []:
            child = module._modules.get(name) if hasattr(module, "_modules") else None
            if not isinstance(child, Module):
                raise AttributeError(f"{type(module).__name__} has no attribute `{name}`")
            module = child
        return module

    def get_parameter(self, target: str) -> Tensor:
        """The parameter at the dotted path ``target`` (``"0.weight"``)."""
        return self._get_tensor(target, "_parameters", "parameter")

    def get_buffer(self, target: str) -> Tensor:
        """The buffer at the dotted path ``target`` (``"0.running_mean"``)."""
        return self._get_tensor(target, "_buffers", "buffer")

    def _get_tensor(self, target: str, table: str, kind: str) -> Tensor:
        path, _, name = target.rpartition(".")
        module = self.get_submodule(path)
        found = getattr(module, table).get(name)
        if found is None:
            raise AttributeError(f"{type(module).__name__} has no {kind} `{name}`")
        return found

    def _cast_floats(self, dtype: np.dtype) -> Module:
        """Cast floating point parameters, their gradients and buffers, keeping the objects."""
        if not ops.is_floating(dtype):
            raise TypeError(f"Module.to: only floating point dtypes are supported, got {dtype}")
        tensors = [p for _, p in self.named_parameters()] + [b for _, b in self.named_buffers()]
        with no_grad():
            for t in tensors:
                if ops.is_floating(t.dtype) and t.dtype != dtype:
                    t._replace(ops.cast(t._node, dtype=dtype))
                    if t.grad is not None:
                        t.grad = t.grad.to(dtype)
        return self

    def train(self, mode: bool = True) -> Module:
        for module in self.modules():
            object.__setattr__(module, "training", mode)
        versions.modes += 1
        return self

    def eval(self) -> Module:
        return self.train(False)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all parameters (to ``None`` by default, as in PyTorch)."""
        zero_grads(self.parameters(), set_to_none)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for param in self.parameters():
            param.requires_grad_(requires_grad)
        return self

    # --- state --------------------------------------------------------------------------

    def _state_items(self, prefix: str = "") -> Iterator[tuple[str, Tensor]]:
        """PyTorch's ``state_dict`` order: each module's parameters, then its persistent
        buffers, then its children's, depth first; a module shared under two names is listed
        under both."""
        for name, param in self._parameters.items():
            if param is not None:
                yield prefix + name, param
        for name, buffer in self._buffers.items():
            if buffer is not None and name not in self._non_persistent_buffers_set:
                yield prefix + name, buffer
        for name, child in self._modules.items():
            if child is not None:
                yield from child._state_items(f"{prefix}{name}.")

    def state_dict(self, *args: Any, destination: Any = None, prefix: str = "",
                   keep_vars: bool = False) -> OrderedDict[str, Tensor]:
        """Parameters and persistent buffers by dotted name, in PyTorch's order (module by
        module), detached unless ``keep_vars`` (values are gathered if needed).

        Examples
        --------
        >>> import pargraph
        >>> net = pargraph.nn.Sequential(pargraph.nn.Linear(2, 3), pargraph.nn.BatchNorm1d(3))
        >>> list(net.state_dict())[:4]
        ['0.weight', '0.bias', '1.weight', '1.bias']
        """
        if args:  # PyTorch's old positional form: (destination, prefix, keep_vars)
            destination, prefix, keep_vars = args + (destination, prefix, keep_vars)[len(args):]
        state: OrderedDict[str, Tensor] = OrderedDict() if destination is None else destination
        modules = list(self.named_modules(prefix=prefix.rstrip(".")))
        for name, module in modules:
            for hook in list(module.__dict__.get("_state_dict_pre_hooks", ())):
                hook(module, f"{name}." if name else "", keep_vars)
        for name, tensor in self._state_items(prefix):
            state[name] = tensor if keep_vars else tensor.detach()
        for name, module in modules:
            if module._has_extra_state():
                state[f"{name}._extra_state" if name else "_extra_state"] = \
                    module.get_extra_state()
        for name, module in reversed(modules):  # PyTorch's: a child's before its parent's
            for hook in list(module.__dict__.get("_state_dict_hooks", ())):
                returned = hook(module, state, f"{name}." if name else "", {})
                if returned is not None:
                    state = returned
        return state

    def register_state_dict_pre_hook(self, hook: Callable) -> RemovableHandle:
        """Call ``hook(module, prefix, keep_vars)`` before ``state_dict`` reads this module.

        Examples
        --------
        >>> import pargraph
        >>> layer, seen = pargraph.nn.Linear(2, 1), []
        >>> _ = layer.register_state_dict_pre_hook(lambda m, prefix, keep: seen.append(prefix))
        >>> _ = layer.state_dict(); seen
        ['']
        """
        return self._hook_in("_state_dict_pre_hooks", hook)

    def register_state_dict_post_hook(self, hook: Callable) -> RemovableHandle:
        """Call ``hook(module, state_dict, prefix, local_metadata)`` once ``state_dict`` has
        this module's entries; it may change them in place.

        Examples
        --------
        >>> import pargraph
        >>> layer = pargraph.nn.Linear(2, 1)
        >>> _ = layer.register_state_dict_post_hook(
        ...     lambda m, state, prefix, meta: state.pop(prefix + "bias"))
        >>> list(layer.state_dict())
        ['weight']
        """
        return self._hook_in("_state_dict_hooks", lambda *args: hook(*args) and None)

    def _register_state_dict_hook(self, hook: Callable) -> RemovableHandle:
        """PyTorch's older form of :meth:`register_state_dict_post_hook`: a state dict
        ``hook`` returns replaces the one made."""
        return self._hook_in("_state_dict_hooks", hook)

    def register_load_state_dict_post_hook(self, hook: Callable) -> RemovableHandle:
        """Call ``hook(module, incompatible_keys)`` when ``load_state_dict`` has matched the
        keys, before it checks them (``strict``) and copies the values: removing a key from
        ``incompatible_keys.missing_keys`` or ``unexpected_keys`` there excuses it.

        Examples
        --------
        >>> import pargraph
        >>> layer = pargraph.nn.Linear(2, 1)
        >>> _ = layer.register_load_state_dict_post_hook(
        ...     lambda m, keys: keys.unexpected_keys.clear())
        >>> layer.load_state_dict({**layer.state_dict(), "old_scale": 1.0})
        <All keys matched successfully>
        """
        return self._hook_in("_load_state_dict_post_hooks", hook)

    def _hook_in(self, table: str, hook: Callable) -> RemovableHandle:
        hooks = self.__dict__.setdefault(table, [])
        hooks.append(hook)
        return RemovableHandle(hooks, hook)

    def load_state_dict(self, state_dict: dict, strict: bool = True):
        """Copy values (tensors or numpy arrays) into the parameters and buffers.

        With ``strict``, missing and unexpected keys raise; a shape mismatch always raises,
        naming the key. Returns ``IncompatibleKeys(missing_keys, unexpected_keys)``.
        """
        state_dict, hooks_missing, hooks_unexpected, errors = _pre_hooks(self, state_dict, strict)
        own = dict(self._state_items())
        extra = {f"{name}._extra_state" if name else "_extra_state": module
                 for name, module in self.named_modules() if module._has_extra_state()}
        missing = [k for k in [*own, *extra] if k not in state_dict] + hooks_missing
        unexpected = [k for k in state_dict if k not in own and k not in extra] \
            + hooks_unexpected
        keys = IncompatibleKeys(missing, unexpected)
        for _, module in self.named_modules():
            for hook in list(module.__dict__.get("_load_state_dict_post_hooks", ())):
                hook(module, keys)
        if strict and missing:
            errors.append("Missing key(s) in state_dict: "
                          + ", ".join(f'"{k}"' for k in missing) + ". ")
        if strict and unexpected:
            errors.append("Unexpected key(s) in state_dict: "
                          + ", ".join(f'"{k}"' for k in unexpected) + ". ")
        values = {}
        for name, target in own.items():
            if name not in state_dict:
                continue
            try:
                array = _converted(state_dict[name], target)
            except (TypeError, ValueError) as error:
                errors.append(f"invalid value for {name}: {error}")
                continue
            if array.shape != target.shape:
                errors.append(f'size mismatch for {name}: copying a param with shape '
                              f'{Size(array.shape)} from checkpoint, the shape in current model is '
                              f'{target.shape}.')
            values[name] = array
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                               + "\n\t".join(errors))
        with interrupts.deferred():  # every value, or none
            for name, array in values.items():
                assign(own[name], array)
        for name, module in extra.items():
            if name in state_dict:
                module.set_extra_state(state_dict[name])
        return keys

    # --- calling and printing -----------------------------------------------------------

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"Module [{type(self).__name__}] is missing the required "
                                  "\"forward\" function")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        version, scope = self._pargraph_scope
        if version != versions.tree:  # the path is a walk up the tree: once per change
            path = self.path()
            scope = f"{path} ({type(self).__name__})" if path else type(self).__name__
            object.__setattr__(self, "_pargraph_scope", (versions.tree, scope))
        # The ops of pargraph's own layers all point at the user's line that called the
        # outermost of them: one stack walk per layer call, not one per op. A user's forward
        # records its own lines.
        site = (grad_mode.site or user_site()) if _own_forward(type(self)) else None
        recorder = recording.recorder
        if recorder is not None:  # a compiled step depends on the module's mode
            recorder.module_called(self)
        # The ops recorded inside belong to this module and carry ``site``: switched inside the
        # try and restored by plain stores, where Python never raises Ctrl-C (a context
        # manager's ``__exit__`` can be interrupted as it starts, leaving the scope switched).
        saved = (naming_state.scope, grad_mode.site)
        try:
            if not saved[0]:  # the outermost module: its scope is its class name
                naming_state.model = scope
            naming_state.scope, grad_mode.site = scope, site
            if self._forward_pre_hooks:  # every op of a forward goes through here: no copies
                args, kwargs = self._pre_hooked(args, kwargs)
            hooked = None
            if "_backward_hooks" in self.__dict__ and grad_mode.enabled and (
                    self._backward_hooks or self._backward_pre_hooks):
                hooked = BackwardHooks(self)
                args = hooked.inputs(args)
            if not self._forward_hooks:
                output = self.forward(*args, **kwargs)
            else:
                try:
                    output = self.forward(*args, **kwargs)
                except BaseException:
                    for hook in list(self._forward_hooks):  # always_call=True: these too
                        if type(hook) is ForwardHook and hook.always_call:
                            hook.call(self, args, kwargs, None)
                    raise
                for hook in list(self._forward_hooks):
                    changed = hook.call(self, args, kwargs, output) if type(hook) is ForwardHook \
                        else hook(self, args, output)
                    if changed is not None:
                        output = changed
            return output if hooked is None else hooked.outputs(output)
        finally:
            naming_state.scope, grad_mode.site = saved

    def _pre_hooked(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """The arguments after the forward pre-hooks: ``hook(module, args)`` returns new
        positional arguments (a tuple, or one argument); one registered ``with_kwargs``,
        ``hook(module, args, kwargs)``, returns both."""
        for hook in list(self._forward_pre_hooks):
            if type(hook) is ForwardHook:
                changed = hook.function(self, args, kwargs)
                if changed is not None:
                    if not (isinstance(changed, tuple) and len(changed) == 2):
                        raise RuntimeError("forward pre-hook must return None or a tuple of "
                                           f"(new_args, new_kwargs), but got {changed}.")
                    args, kwargs = changed
                continue
            changed = hook(self, args)
            if changed is not None:
                args = changed if isinstance(changed, tuple) else (changed,)
        return args, kwargs

    def register_forward_hook(self, hook: Callable, *, prepend: bool = False,
                              with_kwargs: bool = False, always_call: bool = False
                              ) -> RemovableHandle:
        """Call ``hook(module, args, output)`` after each forward (``with_kwargs``:
        ``hook(module, args, kwargs, output)``); a value it returns replaces the output.
        ``prepend``: before the hooks registered already; ``always_call``: also when the
        forward raises (with output None).

        Examples
        --------
        >>> import pargraph
        >>> layer = pargraph.nn.Identity()
        >>> _ = layer.register_forward_hook(lambda module, args, output: output * 2)
        >>> layer(pargraph.ones(1))
        tensor([2.])
        """
        entry = ForwardHook(hook, with_kwargs, always_call) if with_kwargs or always_call else hook
        return self._registered(self._forward_hooks, entry, prepend)

    @staticmethod
    def _registered(hooks: list, entry: Any, prepend: bool) -> RemovableHandle:
        if prepend:
            hooks.insert(0, entry)
        else:
            hooks.append(entry)
        return RemovableHandle(hooks, entry)

    def register_full_backward_hook(self, hook: Callable, prepend: bool = False
                                    ) -> RemovableHandle:
        """Call ``hook(module, grad_input, grad_output)`` when the gradients with respect to
        the module's positional tensor inputs are made (tuples, None where none flows); a
        tuple it returns replaces ``grad_input``. As every hook here, it runs while
        ``backward()`` builds the graph and sees lazy tensors. A call with several inputs
        that require grad raises ``NotImplementedError``.

        Examples
        --------
        >>> import pargraph
        >>> layer, seen = pargraph.nn.Linear(2, 1), []
        >>> _ = layer.register_full_backward_hook(lambda m, gi, go: seen.append(go[0].shape))
        >>> layer(pargraph.ones(3, 2, requires_grad=True)).sum().backward(); seen
        [pargraph.Size([3, 1])]
        """
        return self._backward_hook("_backward_hooks", hook, prepend)

    def register_full_backward_pre_hook(self, hook: Callable, prepend: bool = False
                                        ) -> RemovableHandle:
        """Call ``hook(module, grad_output)`` when the gradients with respect to the module's
        outputs are made, before its inputs'; a tuple it returns replaces ``grad_output``.
        With several tensor outputs it raises ``NotImplementedError``.

        Examples
        --------
        >>> import pargraph
        >>> layer = pargraph.nn.Identity()
        >>> _ = layer.register_full_backward_pre_hook(lambda m, go: (go[0] * 3,))
        >>> x = pargraph.ones(2, requires_grad=True)
        >>> layer(x).sum().backward(); x.grad
        tensor([3., 3.])
        """
        return self._backward_hook("_backward_pre_hooks", hook, prepend)

    def _backward_hook(self, kind: str, hook: Callable, prepend: bool) -> RemovableHandle:
        for name in ("_backward_hooks", "_backward_pre_hooks"):
            self.__dict__.setdefault(name, [])
        hooks = self.__dict__[kind]
        if prepend:
            hooks.insert(0, hook)
        else:
            hooks.append(hook)
        return RemovableHandle(hooks, hook)

    def register_load_state_dict_pre_hook(self, hook: Callable) -> RemovableHandle:
        """Call ``hook(module, state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs)`` before ``load_state_dict`` reads this module's keys
        (``prefix`` + name); it may rename keys in ``state_dict``, a copy of the caller's.

        Examples
        --------
        >>> import pargraph
        >>> layer = pargraph.nn.Linear(2, 1)
        >>> def renamed(module, state, prefix, *_):
        ...     state[prefix + "weight"] = state.pop(prefix + "kernel")
        >>> _ = layer.register_load_state_dict_pre_hook(renamed)
        >>> layer.load_state_dict({"kernel": [[1.0, 2.0]], "bias": [0.0]})
        <All keys matched successfully>
        """
        return self._register_load_state_dict_pre_hook(hook, with_module=True)

    def _register_load_state_dict_pre_hook(self, hook: Callable,
                                           with_module: bool = False) -> RemovableHandle:
        """PyTorch's older form: ``hook`` without the module unless ``with_module``."""
        hooks = self.__dict__.setdefault("_load_state_dict_pre_hooks", [])
        entry = functools.partial(hook, self) if with_module else hook
        hooks.append(entry)
        return RemovableHandle(hooks, entry)

    def register_forward_pre_hook(self, hook: Callable, *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """Call ``hook(module, args)`` before each forward; a value it returns replaces the
        positional arguments (a tuple, or a single argument). ``with_kwargs``:
        ``hook(module, args, kwargs)``, returning ``(args, kwargs)`` or None; ``prepend``:
        before the hooks registered already.

        Examples
        --------
        >>> import pargraph
        >>> layer = pargraph.nn.Identity()
        >>> _ = layer.register_forward_pre_hook(lambda module, args: args[0] + 1)
        >>> layer(pargraph.ones(1))
        tensor([2.])
        """
        entry = ForwardHook(hook, True, False) if with_kwargs else hook
        return self._registered(self._forward_pre_hooks, entry, prepend)

    def apply(self, fn: Callable[[Module], Any]) -> Module:
        """Call ``fn`` on every submodule (children first) and then on this module.

        Examples
        --------
        >>> import pargraph
        >>> seen = []
        >>> _ = pargraph.nn.Sequential(pargraph.nn.ReLU()).apply(lambda m: seen.append(
        ...     type(m).__name__))
        >>> seen
        ['ReLU', 'Sequential']
        """
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        # PyTorch's layout: a one-line extra_repr alone stays on the class's line; with
        # children (or several lines of it) every line gets its own, indented.
        extra = self.extra_repr()
        children = [f"({name}): " + repr(module).replace("\n", "\n  ")
                    for name, module in self._modules.items()]
        lines = (extra.split("\n") if extra else []) + children
        if len(lines) == 1 and not children:
            return f"{type(self).__name__}({lines[0]})"
        if not lines:
            return f"{type(self).__name__}()"
        return f"{type(self).__name__}(\n  " + "\n  ".join(lines) + "\n)"

    def describe(self) -> str:
        """``Linear(in_features=4, ...)`` and its path in the model, for error messages."""
        path = self.path()
        text = f"{type(self).__name__}({self.extra_repr()})"
        return f"{text} at '{path}'" if path else text


def _pre_hooks(model: Module, state_dict: Any, strict: bool) -> tuple[dict, list, list, list]:
    """``state_dict`` (a copy) after every module's load-state-dict pre-hooks, and the keys
    they call missing or unexpected and the errors they report."""
    state_dict = OrderedDict(state_dict)
    missing: list[str] = []
    unexpected: list[str] = []
    errors: list[str] = []
    for name, module in model.named_modules():
        for hook in list(module.__dict__.get("_load_state_dict_pre_hooks", ())):
            hook(state_dict, f"{name}." if name else "", {}, strict, missing, unexpected, errors)
    return state_dict, missing, unexpected, errors


class _Versions:
    """Counters of changes to module trees: ``tree`` when a module gets a parent (the cached
    scopes of modules are stale then), ``registry`` when a parameter, buffer or child of a
    module that a compiled step called is assigned (the step holds the old ones), ``modes``
    when a module's ``training`` is set, ``attributes`` when any other attribute is (a
    compiled step looks at its modules' then)."""

    tree = 0
    registry = 0
    modes = 0
    attributes = 0


versions = context.register("module_versions", _Versions())
_OWN_FORWARD: dict[type, bool] = {}


def _own_forward(cls: type) -> bool:
    """Whether ``cls.forward`` is pargraph's code (Linear, Sequential) rather than a user's."""
    own = _OWN_FORWARD.get(cls)
    if own is None:
        own = _OWN_FORWARD[cls] = in_package(cls.forward)
    return own
