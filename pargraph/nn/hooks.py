"""A module's hooks: the identity nodes that let backward hooks see a call's gradients, and
the record of a forward hook registered with options."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

from pargraph import ops
from pargraph._tensor import Tensor
from pargraph.graph import user_site


class BackwardHooks:
    """One call of a module with backward hooks: its tensor inputs and outputs pass through
    identity nodes whose gradient hooks (``Tensor.register_hook``) collect ``grad_output``
    and call the module's hooks with ``grad_input``, as PyTorch's ``BackwardHook`` does."""

    def __init__(self, module: Any) -> None:
        self.module = module
        self.count = 0  # positional tensor inputs
        self.wanted = False  # whether one requires grad
        self.grad_output: list = []
        self.expected = 0
        #: The identity tensors: a gradient hook runs only while its tensor lives.
        self.held: list[Tensor] = []

    def _identity(self, t: Tensor) -> Tensor:
        """A new node with ``t``'s value (a free reshape): its gradient is this call's."""
        same = ops.reshape(t._node, shape=tuple(t.shape))
        wrapped = t._apply(ops.shown_as, same, "BackwardHookFunctionBackward")
        self.held.append(wrapped)
        return wrapped

    def inputs(self, args: tuple) -> tuple:
        positions = [k for k, a in enumerate(args) if isinstance(a, Tensor)]
        self.count = len(positions)
        needing = [k for k in positions if args[k].requires_grad]
        if len(needing) > 1:
            raise NotImplementedError(
                f"{type(self.module).__name__}: a full backward hook on a call with several "
                "inputs that require grad is not supported")
        if not needing:
            return args
        self.wanted = True
        args = list(args)
        k = needing[0]
        args[k] = self._identity(args[k])
        args[k].register_hook(lambda grad: self._input_grad(positions.index(k), grad))
        return tuple(args)

    def outputs(self, output: Any) -> Any:
        single = isinstance(output, Tensor)
        outputs = [output] if single else list(output) if isinstance(output, tuple) else None
        if outputs is None:
            return output
        tensors = [k for k, o in enumerate(outputs) if isinstance(o, Tensor) and o.requires_grad]
        if len(tensors) > 1 and self.module._backward_pre_hooks:
            raise NotImplementedError(
                f"{type(self.module).__name__}: a full backward pre-hook on a module with "
                "several outputs that require grad is not supported")
        self.grad_output = [None] * len(outputs)
        self.expected = len(tensors)
        for k in tensors:
            outputs[k] = self._identity(outputs[k])
            outputs[k].register_hook(functools.partial(self._output_grad, k))
        return outputs[0] if single else tuple(outputs)

    def _output_grad(self, k: int, grad: Tensor) -> Tensor | None:
        self.grad_output[k] = grad
        for hook in list(self.module._backward_pre_hooks):
            changed = hook(self.module, tuple(self.grad_output))
            if changed is not None:
                self.grad_output = list(changed)
        self.expected -= 1
        if not self.wanted and not self.expected:  # no input to wait for: PyTorch calls now
            if self.module._backward_hooks:
                site = user_site()  # the user's backward() call
                warnings.warn_explicit(
                    "Full backward hook is firing when gradients are computed with respect to "
                    "module outputs since no inputs require gradients. See https://docs."
                    "pytorch.org/docs/main/generated/torch.nn.Module.html#torch.nn.Module."
                    "register_full_backward_hook for more details.", UserWarning,
                    site[0].co_filename if site else "<unknown>", site[1] if site else 0)
            self._call_hooks((None,) * max(self.count, 1))
        return self.grad_output[k]

    def _input_grad(self, position: int, grad: Tensor) -> Tensor:
        grad_input = [None] * self.count
        grad_input[position] = grad
        grad_input = self._call_hooks(tuple(grad_input))
        return grad_input[position]

    def _call_hooks(self, grad_input: tuple) -> tuple:
        for hook in list(self.module._backward_hooks):
            changed = hook(self.module, grad_input, tuple(self.grad_output))
            if changed is not None:
                grad_input = tuple(changed)
        return grad_input


class ForwardHook:
    """A forward hook registered with ``with_kwargs`` or ``always_call`` (a plain one is
    kept as the function itself)."""

    __slots__ = ("function", "with_kwargs", "always_call")

    def __init__(self, function: Callable, with_kwargs: bool, always_call: bool) -> None:
        self.function, self.with_kwargs, self.always_call = function, with_kwargs, always_call

    def call(self, module: Any, args: tuple, kwargs: dict, output: Any) -> Any:
        if self.with_kwargs:
            return self.function(module, args, kwargs, output)
        return self.function(module, args, output)
