"""What must hold for a compiled step to replay: its guards (arguments' shapes, dtypes and
``requires_grad``, grad mode, modules' ``training`` and constant attributes, the optimizer's
state layout and settings), their messages, and ``GraphBreak``, raised where a capture stops."""

from __future__ import annotations

import weakref
from typing import Any

from pargraph import amp
from pargraph._tensor import Tensor
from pargraph.capturing import Symbol
from pargraph.compiler.record import Record
from pargraph.graph import (
    grad_mode,
)
from pargraph.nn.module import Module, versions
from pargraph.pytree import flatten, unflatten


class GraphBreak(RuntimeError):
    """A compiled function with ``fullgraph=True`` did something a capture cannot hold: it
    read a value in the middle of the step."""


def name_of(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__name__


# --- arguments --------------------------------------------------------------------------------


def concrete(value: Any) -> Any:
    """``value`` with plain numbers for the symbols in it."""
    flat, spec = flatten(value)
    if not any(type(v) is Symbol for v in flat):
        return value
    return unflatten(spec, iter([v.value if type(v) is Symbol else v for v in flat]))


def argument_guard(value: Any) -> tuple:
    """What a call's argument must match to replay: a tensor's shape, dtype and
    ``requires_grad``; a number's type (its value is an input); anything else's identity, or
    value if it is a plain constant."""
    if isinstance(value, Tensor):
        node = value._node
        return (Tensor, node.shape, node.dtype, node.requires_grad, node.history)
    if type(value) in (int, float):
        return (type(value),)
    if value is None or type(value) in (bool, str, bytes, complex):
        return (type(value), value)
    return (id(value),)


# --- the program ------------------------------------------------------------------------------

FAILED = object()
ABSENT = object()  # an attribute a module did not have


class Guards:
    """What a capture depends on besides its slots: the arguments' kinds, grad mode, autocast,
    the modules' parameters and ``training``, and the outcomes of what Python decided with its
    numbers (see :mod:`pargraph.capturing`)."""

    def __init__(self, capture: Record) -> None:
        self.arguments, self.spec = capture.argument_guards, capture.argument_spec
        self.grad_mode = capture.grad_mode
        self.autocast = capture.autocast
        self.registry_version = versions.registry
        self.modes_version = -1  # checked at the first call
        self.modules = [(weakref.ref(m), flag) for m, flag in capture.modules.values()]
        self.constants = [(weakref.ref(m), constants)
                          for m, constants in capture.module_constants.values()]
        self.attributes_version = versions.attributes
        self.symbols, self.readers = capture.symbols, capture.readers
        self.failed = ""

    def check(self, flat: list, spec: Any) -> Any:
        """This call's values of the symbols (None without symbols), or ``FAILED`` (then
        ``failed`` names the guard), for the arguments ``flat`` nested as ``spec``."""
        if spec != self.spec:
            return self._fail("the arguments' structure (their nesting, dict keys, a sparse "
                              "tensor's size)")
        guards = self.arguments
        if len(flat) != len(guards):
            return self._fail("the number of arguments")
        for i, value in enumerate(flat):
            if argument_guard(value) != guards[i]:
                return self._fail(f"argument {i} ({describe_guard(guards[i])})")
        if grad_mode.enabled != self.grad_mode:
            return self._fail("grad mode")
        if amp.state.cpu != self.autocast:
            return self._fail("autocast")
        if versions.registry != self.registry_version:
            return self._fail("the modules' parameters and buffers")
        if versions.modes != self.modes_version:  # some module's training was set
            for module, flag in self.modules:
                m = module()
                if m is None or m.training != flag:
                    return self._fail(f"{type(m).__name__}.training")
            self.modes_version = versions.modes
        if versions.attributes != self.attributes_version:  # some module's attribute was set
            for module, constants in self.constants:
                m = module()
                changed = changed_constant(m, constants)
                if changed is not None:
                    return self._fail(f"{type(m).__name__}.{changed}")
            self.attributes_version = versions.attributes
        if not self.symbols.symbols:
            return None
        try:
            leaves = {key: flat[key[1]] if key[0] == "arg" else self.readers[key]()
                      for key in self.symbols.leaves}
        except (KeyError, IndexError):
            return self._fail("the optimizer's state")
        values = self.symbols.evaluate(leaves)
        failed = self.symbols.failed_guard(values)
        if failed is not None:
            names = ", ".join(describe_key(k) for k in self.symbols.leaf_keys(failed))
            return self._fail(f"{names} (Python used its value)")
        return values

    def _fail(self, reason: str) -> Any:
        self.failed = reason
        return FAILED


#: The attribute values a capture holds as constants: what ops take as attributes.
_CONSTANT_TYPES = (int, float, bool, str, type(None), complex)


def module_constants(module: Module) -> dict:
    """``module``'s plain attributes of constant values (numbers, strings, None and tuples of
    them), by name; pargraph's bookkeeping (``_pargraph_*``) left out."""
    found = {}
    for name, value in module.__dict__.items():
        if name.startswith("_pargraph") or name == "training":
            continue
        if type(value) in _CONSTANT_TYPES or (
                isinstance(value, tuple) and all(type(v) in _CONSTANT_TYPES for v in value)):
            found[name] = value
    return found


def changed_constant(module: Module | None, constants: dict) -> str | None:
    """The name of a constant of ``module`` that differs from ``constants``, or None."""
    if module is None:
        return "(a module gone)"
    now = module_constants(module)
    for name, value in constants.items():
        if name not in now or now[name] != value or type(now[name]) is not type(value):
            return name
    return None


def describe_guard(guard: tuple) -> str:
    if guard[0] is Tensor:
        return (f"a tensor of shape {tuple(guard[1])}, {guard[2]}, requires_grad={guard[3]}"
                + (", with autograd history" if guard[4] else ""))
    if len(guard) == 2:
        return f"{guard[1]!r}"
    return guard[0].__name__ if isinstance(guard[0], type) else "an object"


def describe_key(key: Any) -> str:
    if key[0] == "arg":
        return f"argument {key[1]}"
    if key[0] == "group":
        return f"the optimizer's {key[3]}"
    return f"the optimizer's state {key[3]}"
