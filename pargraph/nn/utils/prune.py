"""``pargraph.nn.utils.prune``: PyTorch's pruning. A pruned parameter ``name`` becomes
``name_orig`` (the parameter, still trained) times ``name_mask`` (a buffer of zeros and ones),
computed into the plain attribute ``name`` before each forward by the pruning method, a
forward pre-hook. Pruning a tensor again combines the new mask with the old one (a
``PruningContainer``); ``remove`` makes the pruned tensor the parameter again."""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from typing import Any

import numpy as np

from pargraph import factories
from pargraph._tensor import Tensor
from pargraph.autograd.mode import no_grad
from pargraph.nn.module import Module

__all__ = ["BasePruningMethod", "PruningContainer", "Identity", "RandomUnstructured",
           "L1Unstructured", "RandomStructured", "LnStructured", "CustomFromMask", "identity",
           "random_unstructured", "l1_unstructured", "random_structured", "ln_structured",
           "global_unstructured", "custom_from_mask", "remove", "is_pruned"]


class BasePruningMethod:
    """A way of choosing which entries of a tensor to zero: ``compute_mask(t, default_mask)``
    gives the new mask; ``PRUNING_TYPE`` is ``"unstructured"``, ``"structured"`` (whole
    slices along ``dim``) or ``"global"``."""

    PRUNING_TYPE = "unstructured"
    _tensor_name: str

    def __call__(self, module: Module, inputs: Any) -> None:
        setattr(module, self._tensor_name, self.apply_mask(module))

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        raise NotImplementedError

    def apply_mask(self, module: Module) -> Tensor:
        """The pruned tensor: the original times the mask (differentiable in the original)."""
        mask = getattr(module, self._tensor_name + "_mask")
        original = getattr(module, self._tensor_name + "_orig")
        return mask.to(original.dtype) * original

    @classmethod
    def apply(cls, module: Module, name: str, *args: Any, importance_scores: Any = None,
              **kwargs: Any) -> BasePruningMethod:
        """Prune ``module``'s ``name`` with a new ``cls(*args, **kwargs)``, on top of the
        pruning it had; returns the method now hooked to it."""
        old = _take_hook(module, name)
        method = cls(*args, **kwargs)
        method._tensor_name = name
        if old is not None:
            container = old if isinstance(old, PruningContainer) else PruningContainer(old)
            container.add_pruning_method(method)
            method = container
        original = getattr(module, name)
        scores = original if importance_scores is None else importance_scores
        if tuple(scores.shape) != tuple(original.shape):
            raise ValueError(f"importance_scores should have the same shape as parameter "
                             f"{name} of {module}")
        if old is None:  # the parameter becomes name_orig
            module.register_parameter(name + "_orig", original)
            del module._parameters[name]
            default = factories.ones_like(original)
        else:
            default = getattr(module, name + "_mask").detach().clone()
        with no_grad():
            mask = method.compute_mask(scores.detach(), default_mask=default)
        if name + "_mask" in module._buffers:
            module._buffers[name + "_mask"] = mask
        else:
            module.register_buffer(name + "_mask", mask)
        setattr(module, name, method.apply_mask(module))
        module.register_forward_pre_hook(method)
        return method

    def prune(self, t: Tensor, default_mask: Tensor | None = None,
              importance_scores: Tensor | None = None) -> Tensor:
        """``t`` times the mask this method computes for it."""
        scores = t if importance_scores is None else importance_scores
        default = factories.ones_like(t) if default_mask is None else default_mask
        return t * self.compute_mask(scores, default_mask=default)

    def remove(self, module: Module) -> None:
        """Make the pruned tensor ``module``'s parameter again, without the mask."""
        name = self._tensor_name
        with no_grad():
            pruned = self.apply_mask(module)
        if hasattr(module, name):
            delattr(module, name)
        original = module._parameters.pop(name + "_orig")
        with no_grad():
            original.copy_(pruned)
        del module._buffers[name + "_mask"]
        setattr(module, name, original)


def _take_hook(module: Module, name: str) -> BasePruningMethod | None:
    """The pruning method hooked to ``name``, taken off the module's hooks."""
    found = [h for h in module._forward_pre_hooks
             if isinstance(h, BasePruningMethod) and h._tensor_name == name]
    if len(found) > 1:
        raise AssertionError(f"Avoid adding multiple pruning hooks to the same tensor {name} "
                             f"of module {module}. Use a PruningContainer.")
    for hook in found:
        module._forward_pre_hooks.remove(hook)
    return found[0] if found else None


class PruningContainer(BasePruningMethod):
    """The pruning methods applied to one tensor, one after another: each prunes only what
    the previous ones kept (entries, or, for a structured one, slices with an entry left)."""

    def __init__(self, *methods: BasePruningMethod) -> None:
        self._pruning_methods: tuple[BasePruningMethod, ...] = ()
        if methods:
            self._tensor_name = methods[0]._tensor_name
        for method in methods:
            self.add_pruning_method(method)

    def add_pruning_method(self, method: BasePruningMethod) -> None:
        if not isinstance(method, BasePruningMethod):
            raise TypeError(f"{type(method)} is not a BasePruningMethod subclass")
        if self._tensor_name != method._tensor_name:
            raise ValueError(f"Can only add pruning methods acting on the parameter named "
                             f"'{self._tensor_name}' to PruningContainer {self}. Found "
                             f"'{method._tensor_name}'")
        self._pruning_methods += (method,)

    def __len__(self) -> int:
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, k: int) -> BasePruningMethod:
        return self._pruning_methods[k]

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        method = self._pruning_methods[-1]
        values = t.detach().numpy()
        mask = default_mask.numpy().astype(values.dtype)
        if method.PRUNING_TYPE == "global":
            return method.compute_mask(t, default_mask)
        if method.PRUNING_TYPE == "unstructured":
            kept = mask == 1
        else:  # the slices along dim with an entry left
            dim = method.dim % values.ndim
            others = tuple(d for d in range(values.ndim) if d != dim)
            alive = mask.sum(axis=others) != 0
            kept = np.zeros(mask.shape, bool)
            kept[(slice(None),) * dim + (alive,)] = True
            shape = list(values.shape)
            shape[dim] = int(alive.sum())
            part = method.compute_mask(
                factories.tensor(values[kept].reshape(shape)),
                default_mask=factories.tensor(mask[kept].reshape(shape)))
            new = mask.copy()
            new[kept] = part.numpy().reshape(-1)
            return factories.tensor(new)
        part = method.compute_mask(factories.tensor(values[kept]),
                                   default_mask=factories.tensor(mask[kept]))
        new = mask.copy()
        new[kept] = part.numpy()
        return factories.tensor(new)


class Identity(BasePruningMethod):
    """Prunes nothing: the mask is all ones."""

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        return default_mask

    @classmethod
    def apply(cls, module: Module, name: str) -> BasePruningMethod:
        return super().apply(module, name)


def _checked_amount(amount: Any) -> None:
    if not isinstance(amount, numbers.Real):
        raise TypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    if (isinstance(amount, numbers.Integral) and amount < 0) or (
            not isinstance(amount, numbers.Integral) and (amount > 1.0 or amount < 0.0)):
        raise ValueError(f"amount={amount} should either be a float in the range [0, 1] or a "
                         "non-negative integer")


def _count(amount: Any, size: int) -> int:
    """How many units ``amount`` prunes of ``size``."""
    count = amount if isinstance(amount, numbers.Integral) else round(amount * size)
    if isinstance(amount, numbers.Integral) and amount > size:
        raise ValueError(f"amount={amount} should be smaller than the number of parameters to "
                         f"prune={size}")
    return count


def _zeroed(default_mask: Tensor, flat_positions: np.ndarray) -> Tensor:
    mask = default_mask.numpy().copy()
    mask.reshape(-1)[flat_positions] = 0
    return factories.tensor(mask)


class _Unstructured(BasePruningMethod):
    """Prunes ``amount`` entries (a fraction, or a count): those :meth:`_pruned` picks."""

    def __init__(self, amount: Any) -> None:
        _checked_amount(amount)
        self.amount = amount

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        count = _count(self.amount, t.numel())
        if count == 0:
            return default_mask.clone()
        return _zeroed(default_mask, self._pruned(t, count))

    def _pruned(self, t: Tensor, count: int) -> np.ndarray:
        """The flat positions of the ``count`` entries to prune."""
        raise NotImplementedError


class RandomUnstructured(_Unstructured):
    """Prunes ``amount`` entries (a fraction, or a count) chosen at random."""

    def _pruned(self, t: Tensor, count: int) -> np.ndarray:
        draws = factories.rand(t.numel()).numpy()
        return np.argsort(-draws, kind="stable")[:count]

    @classmethod
    def apply(cls, module: Module, name: str, amount: Any) -> BasePruningMethod:
        return super().apply(module, name, amount=amount)


class L1Unstructured(_Unstructured):
    """Prunes the ``amount`` entries of smallest magnitude."""

    def _pruned(self, t: Tensor, count: int) -> np.ndarray:
        magnitudes = np.abs(t.detach().numpy()).reshape(-1)
        return np.argsort(magnitudes, kind="stable")[:count]

    @classmethod
    def apply(cls, module: Module, name: str, amount: Any,
              importance_scores: Any = None) -> BasePruningMethod:
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


def _checked_structured(t: Tensor, dim: int) -> None:
    if t.ndim <= 1:
        raise ValueError(f"Structured pruning can only be applied to multidimensional "
                         f"tensors. Found tensor of shape {t.shape} with {t.ndim} dims")
    if dim >= t.ndim:
        raise IndexError(f"Invalid index {dim} for tensor of size {t.shape}")


def _channels(t: Tensor, default_mask: Tensor, dim: int, keep: np.ndarray) -> Tensor:
    """The default mask with the slices along ``dim`` that ``keep`` does not list zeroed."""
    shape = [1] * t.ndim
    shape[dim] = t.shape[dim]
    kept = np.zeros(t.shape[dim], default_mask.numpy().dtype)
    kept[keep] = 1
    return factories.tensor(default_mask.numpy() * kept.reshape(shape))


class _Structured(BasePruningMethod):
    """Prunes ``amount`` slices along ``dim`` (channels): all but those :meth:`_kept`
    picks."""

    PRUNING_TYPE = "structured"
    dim: int

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        _checked_structured(t, self.dim)
        size = t.shape[self.dim]
        count = _count(self.amount, size)
        if count == 0:
            return default_mask
        dim = self.dim % t.ndim
        return _channels(t, default_mask, dim, self._kept(t, dim, size, count))

    def _kept(self, t: Tensor, dim: int, size: int, count: int) -> np.ndarray:
        """The positions along ``dim`` of the slices that stay."""
        raise NotImplementedError


class RandomStructured(_Structured):
    """Prunes ``amount`` slices along ``dim`` (channels) chosen at random."""

    def __init__(self, amount: Any, dim: int = -1) -> None:
        _checked_amount(amount)
        self.amount, self.dim = amount, dim

    def _kept(self, t: Tensor, dim: int, size: int, count: int) -> np.ndarray:
        draws = factories.rand(size).numpy()
        return np.argsort(draws, kind="stable")[count:]

    @classmethod
    def apply(cls, module: Module, name: str, amount: Any, dim: int = -1) -> BasePruningMethod:
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(_Structured):
    """Prunes the ``amount`` slices along ``dim`` of smallest ``n``-norm."""

    def __init__(self, amount: Any, n: Any, dim: int = -1) -> None:
        _checked_amount(amount)
        self.amount, self.n, self.dim = amount, n, dim

    def _kept(self, t: Tensor, dim: int, size: int, count: int) -> np.ndarray:
        norms = t.detach().norm(self.n, dim=[d for d in range(t.ndim) if d != dim]).numpy()
        return np.argsort(-norms, kind="stable")[:size - count]

    @classmethod
    def apply(cls, module: Module, name: str, amount: Any, n: Any, dim: int,
              importance_scores: Any = None) -> BasePruningMethod:
        return super().apply(module, name, amount=amount, n=n, dim=dim,
                             importance_scores=importance_scores)


class CustomFromMask(BasePruningMethod):
    """Prunes where a given mask is zero."""

    PRUNING_TYPE = "global"

    def __init__(self, mask: Any) -> None:
        self.mask = mask

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        if tuple(default_mask.shape) != tuple(self.mask.shape):
            raise AssertionError(f"default_mask shape {default_mask.shape} must match "
                                 f"self.mask shape {self.mask.shape}")
        return default_mask * factories.as_tensor(self.mask).to(default_mask.dtype)

    @classmethod
    def apply(cls, module: Module, name: str, mask: Any) -> BasePruningMethod:
        return super().apply(module, name, mask=mask)


def identity(module: Module, name: str) -> Module:
    """Hook pruning with a mask of ones onto ``module``'s ``name`` (``name_orig``,
    ``name_mask``).

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.nn.utils import prune
    >>> sorted(dict(prune.identity(pargraph.nn.Linear(2, 1), "weight").named_buffers()))
    ['weight_mask']
    """
    Identity.apply(module, name)
    return module


def random_unstructured(module: Module, name: str, amount: Any) -> Module:
    """Prune ``amount`` random entries of ``module``'s ``name``.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.nn.utils import prune
    >>> layer = prune.random_unstructured(pargraph.nn.Linear(4, 2), "weight", amount=3)
    >>> int((layer.weight == 0).sum())
    3
    """
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module: Module, name: str, amount: Any,
                    importance_scores: Any = None) -> Module:
    """Prune the ``amount`` entries of ``module``'s ``name`` of smallest magnitude (or
    importance score).

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.nn.utils import prune
    >>> layer = pargraph.nn.Linear(2, 1, bias=False)
    >>> with pargraph.no_grad():
    ...     _ = layer.weight.copy_(pargraph.tensor([[0.1, -2.0]]))
    >>> prune.l1_unstructured(layer, "weight", amount=0.5).weight
    tensor([[ 0., -2.]], grad_fn=<MulBackward0>)
    """
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module: Module, name: str, amount: Any, dim: int) -> Module:
    """Prune ``amount`` random slices of ``module``'s ``name`` along ``dim``.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.nn.utils import prune
    >>> layer = prune.random_structured(pargraph.nn.Linear(3, 4), "weight", amount=2, dim=0)
    >>> int((layer.weight.abs().sum(1) == 0).sum())
    2
    """
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module: Module, name: str, amount: Any, n: Any, dim: int,
                  importance_scores: Any = None) -> Module:
    """Prune the ``amount`` slices of ``module``'s ``name`` along ``dim`` of smallest
    ``n``-norm.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.nn.utils import prune
    >>> layer = prune.ln_structured(pargraph.nn.Linear(3, 4), "weight", amount=1, n=2, dim=0)
    >>> int((layer.weight.abs().sum(1) == 0).sum())
    1
    """
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def global_unstructured(parameters: Iterable, pruning_method: type,
                        importance_scores: dict | None = None, **kwargs: Any) -> None:
    """Prune the ``(module, name)`` tensors together, as one vector, with an unstructured
    ``pruning_method(**kwargs)``: the amount counts over all of them.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.nn.utils import prune
    >>> a, b = pargraph.nn.Linear(2, 2), pargraph.nn.Linear(2, 2)
    >>> prune.global_unstructured([(a, "weight"), (b, "weight")],
    ...                           pruning_method=prune.L1Unstructured, amount=4)
    >>> int((a.weight == 0).sum() + (b.weight == 0).sum())
    4
    """
    if not isinstance(parameters, Iterable):
        raise TypeError("global_unstructured(): parameters is not an Iterable")
    parameters = list(parameters)
    importance_scores = {} if importance_scores is None else importance_scores
    if not isinstance(importance_scores, dict):
        raise TypeError("global_unstructured(): importance_scores must be of type dict")
    scores = np.concatenate([np.asarray(importance_scores.get(
        (module, name), getattr(module, name)).detach().numpy()).reshape(-1)
        for module, name in parameters])
    masks = np.concatenate([
        (getattr(module, name + "_mask").numpy() if hasattr(module, name + "_mask")
         else np.ones(getattr(module, name).shape, scores.dtype)).reshape(-1)
        for module, name in parameters])
    method = pruning_method(**kwargs)
    method._tensor_name = "temp"
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError(f'Only "unstructured" PRUNING_TYPE supported for the `pruning_method`. '
                        f"Found method {pruning_method} of type {method.PRUNING_TYPE}")
    container = PruningContainer(method)
    final = container.compute_mask(factories.tensor(scores),
                                   default_mask=factories.tensor(masks.astype(scores.dtype)))
    start = 0
    for module, name in parameters:
        size = getattr(module, name).numel()
        piece = final[start:start + size].reshape(tuple(getattr(module, name).shape))
        custom_from_mask(module, name, mask=piece)
        start += size


def custom_from_mask(module: Module, name: str, mask: Any) -> Module:
    """Prune ``module``'s ``name`` where ``mask`` is zero.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.nn.utils import prune
    >>> layer = prune.custom_from_mask(pargraph.nn.Linear(2, 2), "bias",
    ...                                pargraph.tensor([1.0, 0.0]))
    >>> (layer.bias == 0).tolist()
    [False, True]
    """
    CustomFromMask.apply(module, name, mask)
    return module


def remove(module: Module, name: str) -> Module:
    """Make ``module``'s pruned ``name`` its parameter again (the pruned values, no mask, no
    hook).

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.nn.utils import prune
    >>> layer = prune.remove(prune.identity(pargraph.nn.Linear(2, 1), "weight"), "weight")
    >>> sorted(dict(layer.named_parameters()))
    ['bias', 'weight']
    """
    for hook in list(module._forward_pre_hooks):
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            hook.remove(module)
            module._forward_pre_hooks.remove(hook)
            return module
    raise ValueError(f"Parameter '{name}' of module {module} has to be pruned before pruning "
                     "can be removed")


def is_pruned(module: Module) -> bool:
    """Whether a pruning method is hooked to ``module`` or one of its submodules.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.nn.utils import prune
    >>> prune.is_pruned(pargraph.nn.Linear(2, 1))
    False
    """
    return any(isinstance(hook, BasePruningMethod) for _, m in module.named_modules()
               for hook in m._forward_pre_hooks)
