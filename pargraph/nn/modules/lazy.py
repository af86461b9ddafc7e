"""Lazy modules: parameters without a shape until the first call infers it."""

from __future__ import annotations

from typing import Any

import numpy as np

from pargraph import ops
from pargraph._tensor import Tensor, apply
from pargraph.autograd.mode import no_grad
from pargraph.factories import defaults
from pargraph.nn.module import Parameter


class _Uninitialized:
    """What the two placeholders share: no shape until :meth:`materialize` gives one."""

    cls_to_become: type = Tensor

    def materialize(self, shape: Any, device: Any = None, dtype: Any = None) -> None:
        """Become a tensor of ``shape`` (uninitialized values) and of the class it stands
        for."""
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        dtype = np.dtype(dtype) if dtype is not None else self._lazy_dtype
        with no_grad():
            self._replace(ops.constant(np.empty(shape, dtype=dtype)))
        self.__class__ = self.cls_to_become

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"

    def __reduce_ex__(self, protocol: int):
        return type(self), (self.requires_grad, None, self._lazy_dtype)


class UninitializedParameter(_Uninitialized, Parameter):
    """A parameter whose shape is not known yet (a lazy module's, until its first call).

    Examples
    --------
    >>> import pargraph
    >>> p = pargraph.nn.UninitializedParameter()
    >>> p.materialize((2, 3)); type(p).__name__, tuple(p.shape)
    ('Parameter', (2, 3))
    """

    cls_to_become = Parameter

    def __init__(self, requires_grad: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        self._lazy_dtype = np.dtype(dtype) if dtype is not None else defaults.float
        super().__init__(np.zeros(0, self._lazy_dtype), requires_grad)


class UninitializedBuffer(_Uninitialized, Tensor):
    """A buffer whose shape is not known yet (a lazy module's running statistics)."""

    cls_to_become = Tensor

    def __init__(self, requires_grad: bool = False, device: Any = None,
                 dtype: Any = None) -> None:
        self._lazy_dtype = np.dtype(dtype) if dtype is not None else defaults.float
        super().__init__(ops.constant(np.zeros(0, self._lazy_dtype)))
        if requires_grad:
            self.requires_grad_(True)


def is_lazy(param: Any) -> bool:
    """Whether ``param`` is a placeholder whose shape is not known yet."""
    return isinstance(param, _Uninitialized)


class LazyModuleMixin:
    """A module whose first call gives its placeholders their shapes
    (``initialize_parameters(*args)``) and makes it ``cls_to_become``.

    Examples
    --------
    >>> import pargraph
    >>> layer = pargraph.nn.LazyLinear(2)
    >>> layer.has_uninitialized_params()
    True
    >>> _ = layer(pargraph.ones(4, 3)); type(layer).__name__, layer.in_features
    ('Linear', 3)
    """

    cls_to_become: type | None = None

    def _lazy_hooks(self) -> None:
        self._initialize_hook = self.register_forward_pre_hook(_infer_parameters)
        self._load_hook = self.register_load_state_dict_pre_hook(_materialized_from)

    def has_uninitialized_params(self) -> bool:
        return any(is_lazy(t) for t in (*self._parameters.values(), *self._buffers.values()))

    def initialize_parameters(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(f"initialize_parameters is not implemented for "
                                  f"{type(self).__name__}")


def _materialized_from(module: Any, state_dict: dict, prefix: str, *_: Any) -> None:
    """A placeholder takes the shape of the tensor a state dict loads into it."""
    for table in (module._parameters, module._buffers):
        for name, value in table.items():
            loaded = state_dict.get(prefix + name)
            if is_lazy(value) and loaded is not None and not is_lazy(loaded):
                value.materialize(tuple(np.shape(loaded)))


def _infer_parameters(module: Any, args: tuple) -> None:
    """The first call's forward pre-hook: shapes from the input, then the eager layer."""
    module.initialize_parameters(*args)
    if module.has_uninitialized_params():
        raise RuntimeError(f"module {type(module).__name__} has not been fully initialized")
    module._initialize_hook.remove()
    module._load_hook.remove()
    del module._initialize_hook, module._load_hook
    if module.cls_to_become is not None:
        module.__class__ = module.cls_to_become


def _check_loaded(name: str, inferred: int, loaded: int) -> None:
    if inferred != loaded:
        raise AssertionError(f"The {name} inferred from input: {inferred} is not equal to "
                             f"{name} from self.weight: {loaded}")


class _LazyNormMixin(LazyModuleMixin):
    """``num_features`` from the first input's channel dimension."""

    def _lazy_init(self, affine: bool, track_running_stats: bool, dtype: Any) -> None:
        if affine:
            self.weight = UninitializedParameter(dtype=dtype)
            self.bias = UninitializedParameter(dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(dtype=dtype)
            self.running_var = UninitializedBuffer(dtype=dtype)
        self._lazy_hooks()

    def reset_parameters(self) -> None:
        """Running statistics back to zero mean and unit variance, the scale to ones and the
        shift to zeros (once the shapes are known)."""
        if self.has_uninitialized_params() or self.num_features == 0:
            return
        with no_grad():
            if self.track_running_stats:
                self.running_mean.zero_()
                self.running_var.fill_(1.0)
                self.num_batches_tracked.zero_()
            if self.affine:
                self.weight.fill_(1.0)
                self.bias.zero_()

    def initialize_parameters(self, input: Tensor, *_: Any) -> None:
        if not self.has_uninitialized_params():
            if self.num_features == 0:  # loaded from a state dict
                self.num_features = input.shape[1]
            return
        self.num_features = input.shape[1]  # as PyTorch's, unbatched input too
        for name in ("weight", "bias", "running_mean", "running_var"):
            value = getattr(self, name)
            if is_lazy(value):
                value.materialize((self.num_features,))
        self.reset_parameters()


def _lazy_norm(base: type) -> type:
    """``Lazy<base>``: the normalization's arguments without ``num_features`` (affine and
    tracking running statistics by default, the instance norms' too, as PyTorch's)."""

    class LazyNorm(_LazyNormMixin, base):
        cls_to_become = base

        def __init__(self, eps: float = 1e-5, momentum: float | None = 0.1,
                     affine: bool = True, track_running_stats: bool = True,
                     device: Any = None, dtype: Any = None) -> None:
            super().__init__(0, eps, momentum, False, False)
            self.affine, self.track_running_stats = affine, track_running_stats
            if track_running_stats:
                self.num_batches_tracked = apply(ops.constant, np.zeros((), np.int64))
            self._lazy_init(affine, track_running_stats, dtype)

    LazyNorm.__name__ = LazyNorm.__qualname__ = f"Lazy{base.__name__}"
    LazyNorm.__doc__ = (f"A ``{base.__name__}`` whose ``num_features`` is the channel "
                        "dimension of its first input.")
    return LazyNorm
