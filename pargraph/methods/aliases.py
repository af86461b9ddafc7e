"""PyTorch's other names for the same Tensor methods (``absolute``, ``arccos``, ``greater``...)."""

from __future__ import annotations

from typing import Any

from pargraph import ops


class AliasMethods:
    """Tensor's PyTorch's other names: a mixin of ``Tensor`` (``pargraph.methods`` says what the
    class it joins has)."""

    def absolute(self) -> Any:
        """``abs``."""
        return self.abs()

    def clamp_min(self, min: Any) -> Any:
        """``clamp(min=min)``."""
        return self.clamp(min=min)

    def clamp_max(self, max: Any) -> Any:
        """``clamp(max=max)``."""
        return self.clamp(max=max)

    def clamp_min_(self, min: Any) -> Any:
        """``clamp_(min=min)``."""
        return self.clamp_(min=min)

    def clamp_max_(self, max: Any) -> Any:
        """``clamp_(max=max)``."""
        return self.clamp_(max=max)

    def arcsin(self) -> Any:
        """``asin``."""
        return self.asin()

    def arccos(self) -> Any:
        """``acos``."""
        return self.acos()

    def arctan(self) -> Any:
        """``atan``."""
        return self.atan()

    def arcsinh(self) -> Any:
        """``asinh``."""
        return self.asinh()

    def arccosh(self) -> Any:
        """``acosh``."""
        return self.acosh()

    def arctanh(self) -> Any:
        """``atanh``."""
        return self.atanh()

    def arctan2(self, other: Any) -> Any:
        """``atan2``."""
        return self.atan2(other)

    def multiply(self, other: Any) -> Any:
        """``mul``."""
        return self.mul(other)

    def divide(self, other: Any, *, rounding_mode: str | None = None) -> Any:
        """``div``."""
        return self.div(other, rounding_mode=rounding_mode)

    def true_divide(self, other: Any) -> Any:
        """``div`` without rounding."""
        return self.div(other)

    def subtract(self, other: Any, *, alpha: Any = 1) -> Any:
        """``sub``."""
        return self.sub(other, alpha=alpha)

    def negative(self) -> Any:
        """``neg``."""
        return self.neg()

    def positive(self) -> Any:
        """The tensor itself (``+x``)."""
        if self.dtype == bool:
            raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
        return self

    def greater(self, other: Any) -> Any:
        """``gt``."""
        return self.gt(other)

    def greater_equal(self, other: Any) -> Any:
        """``ge``."""
        return self.ge(other)

    def less(self, other: Any) -> Any:
        """``lt``."""
        return self.lt(other)

    def less_equal(self, other: Any) -> Any:
        """``le``."""
        return self.le(other)

    def not_equal(self, other: Any) -> Any:
        """``ne``."""
        return self.ne(other)

    def fix(self) -> Any:
        """``trunc``."""
        return self.trunc()

    def swapaxes(self, axis0: int, axis1: int) -> Any:
        """``transpose``."""
        return self.transpose(axis0, axis1)

    def swapdims(self, dim0: int, dim1: int) -> Any:
        """``transpose``."""
        return self.transpose(dim0, dim1)

    def movedim(self, source: Any, destination: Any) -> Any:
        """The dimensions at ``source`` (an int or a sequence) moved to ``destination``, the
        others in their order around them (a ``permute``).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(2, 3, 4).movedim(1, -1).shape
        pargraph.Size([2, 4, 3])
        """
        sources = [source] if isinstance(source, int) else list(source)
        destinations = [destination] if isinstance(destination, int) else list(destination)
        if len(sources) != len(destinations):
            raise RuntimeError(f"movedim: Invalid source or destination dims: source "
                               f"({sources} dims) should contain the same number of dims as "
                               f"destination ({destinations} dims)")
        sources = [ops.normalize_dim(d, self.ndim) for d in sources]
        destinations = [ops.normalize_dim(d, self.ndim) for d in destinations]
        for name, dims in (("source", sources), ("destination", destinations)):
            if len(set(dims)) != len(dims):
                raise RuntimeError(f"movedim: repeated dim in `{name}` ({dims})")
        order: list = [None] * self.ndim
        for s, d in zip(sources, destinations):
            order[d] = s
        rest = iter(d for d in range(self.ndim) if d not in sources)
        return self.permute(*[d if d is not None else next(rest) for d in order])

    def moveaxis(self, source: Any, destination: Any) -> Any:
        """``movedim``."""
        return self.movedim(source, destination)

    def ravel(self) -> Any:
        """The elements as one dimension (``reshape(-1)``)."""
        return self.reshape(-1)

    def split_with_sizes(self, split_sizes: Any, dim: int = 0) -> Any:
        """``split`` into pieces of ``split_sizes``."""
        return self.split(list(split_sizes), dim)

    def sum_to_size(self, *size: Any) -> Any:
        """The sum over the dimensions that ``size`` (which must broadcast to this tensor's
        shape) has as 1 or lacks, in ``size``'s shape.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(2, 3).sum_to_size(1, 3).tolist()
        [[2.0, 2.0, 2.0]]
        """
        size = tuple(size[0]) if len(size) == 1 and not isinstance(size[0], int) else size
        shape = tuple(self.shape)
        lead = len(shape) - len(size)
        if lead < 0 or any(s not in (1, n) for s, n in zip(size, shape[lead:])):
            raise RuntimeError(f"size {{{list(size)}}} is not expandable to size "
                               f"{{{list(shape)}}}.")
        result = self.sum(tuple(range(lead))) if lead else self
        ones = tuple(d for d, (s, n) in enumerate(zip(size, shape[lead:])) if s == 1 and n != 1)
        return result.sum(ones, keepdim=True) if ones else result

    def cumprod_(self, dim: int, dtype: Any = None) -> Any:
        """``cumprod`` in place."""
        return self._in_place(self.cumprod(dim, dtype=dtype).to(self.dtype))

    def renorm_(self, p: float, dim: int, maxnorm: float) -> Any:
        """``renorm`` in place."""
        return self._in_place(self.renorm(p, dim, maxnorm))

    def polygamma_(self, n: int) -> Any:
        """``polygamma(n)`` in place."""
        return self._in_place(self.polygamma(n))

    def mvlgamma_(self, p: int) -> Any:
        """``mvlgamma(p)`` in place."""
        return self._in_place(self.mvlgamma(p))

    def get_device(self) -> int:
        """-1, PyTorch's number for the CPU."""
        return -1

    def is_pinned(self, device: Any = None) -> bool:
        """False: pinned memory is for copies to an accelerator, which pargraph lacks."""
        return False

    def pin_memory(self, device: Any = None) -> Any:
        """Raises, as PyTorch does on a machine without an accelerator."""
        raise RuntimeError("Cannot access accelerator device when none is available.")

    def is_conj(self) -> bool:
        """False: no tensor is a lazily conjugated view (so ``resolve_conj`` is itself)."""
        return False

    def is_neg(self) -> bool:
        """False: no tensor is a lazily negated view (so ``resolve_neg`` is itself)."""
        return False

    def resolve_conj(self) -> Any:
        """This tensor (see ``is_conj``)."""
        return self

    def resolve_neg(self) -> Any:
        """This tensor (see ``is_neg``)."""
        return self
