"""Capture hooks: the places a compiled step's first call reports to, and its scalar inputs.

While :func:`pargraph.compile` captures a call, this thread's :data:`recording` holds its
recorder. The code that changes training state or reads values asks it first: ``realize``
(queued, not run), a value read (a graph break), a tensor rebound (state written), a ``.grad``
set, a random draw, a module called, an optimizer step, an op recorded with a
:class:`Symbol` among its arguments. With no capture running, each hook costs one attribute
read of a thread-local.

A :class:`Symbol` is a Python number that a captured step takes as an input: a scalar argument
of the compiled function, a hyperparameter of an optimizer's group (``lr``, set by a scheduler
every step), an optimizer's step count. Arithmetic on it records an expression, which a
replay evaluates with the new values; an op that receives it as a literal or attribute binds
that slot (:meth:`SymbolTable.unwrap`). Any other use (``float()``, ``if``, a comparison,
``math.sqrt``, printing) gives the Python value away: that value is then a guard of the
capture, and a call with another value captures again.
"""

from __future__ import annotations

import math
import numbers
import operator
import threading
from collections.abc import Callable
from typing import Any

from pargraph.context import context


class _Recording(threading.local):
    """The recorder of the capture running in this thread (``None``: none is)."""

    recorder: Any = None


recording = context.register("recording", _Recording())


def active() -> Any:
    """This thread's recorder, or ``None``."""
    return recording.recorder


class Symbol:
    """A number a captured step takes as an input (see the module's docstring).

    ``value`` is its value in the capturing call; a leaf has a ``key`` naming where a replay
    reads it, any other symbol an ``op`` and its ``args`` (symbols or plain numbers).
    """

    __slots__ = ("value", "key", "op", "args", "table", "index")
    __array_ufunc__ = None  # numpy defers to the reflected operators below

    def __init__(self, table: SymbolTable, value: Any, key: Any = None,
                 op: Callable | None = None, args: tuple = ()) -> None:
        self.table, self.value, self.key, self.op, self.args = table, value, key, op, args
        self.index = len(table.symbols)
        table.symbols.append(self)

    def _apply(self, op: Callable, *args: Any) -> Any:
        # A tensor (or anything but a number) on the other side answers itself: ``w * loss``
        # becomes ``loss.__rmul__(w)``, a tensor op taking the symbol as a scalar.
        if not all(isinstance(a, (Symbol, numbers.Number)) for a in args):
            return NotImplemented
        return self.table.apply(op, args)

    def __add__(self, other): return self._apply(operator.add, self, other)
    def __radd__(self, other): return self._apply(operator.add, other, self)
    def __sub__(self, other): return self._apply(operator.sub, self, other)
    def __rsub__(self, other): return self._apply(operator.sub, other, self)
    def __mul__(self, other): return self._apply(operator.mul, self, other)
    def __rmul__(self, other): return self._apply(operator.mul, other, self)
    def __truediv__(self, other): return self._apply(operator.truediv, self, other)
    def __rtruediv__(self, other): return self._apply(operator.truediv, other, self)
    def __pow__(self, other): return self._apply(operator.pow, self, other)
    def __rpow__(self, other): return self._apply(operator.pow, other, self)
    def __neg__(self): return self._apply(operator.neg, self)
    def __pos__(self): return self
    def __abs__(self): return self._apply(operator.abs, self)

    # Every other use gives the value to Python: the capture guards on it from then on (on
    # the outcome, for a truth test or a comparison: ``if momentum:`` holds for any nonzero).
    def _given_away(self) -> Any:
        self.table.guard(self, None, None)
        return self.value

    def _decided(self, test: Callable, *args: Any) -> Any:
        args = tuple(_plain(a) for a in args)
        outcome = test(self.value, *args)
        self.table.guard(self, (test, args), outcome)
        return outcome

    def __float__(self): return float(self._given_away())
    def __int__(self): return int(self._given_away())
    def __index__(self): return operator.index(self._given_away())
    def __bool__(self): return self._decided(bool)
    def __hash__(self): return hash(self._given_away())
    def __eq__(self, other): return self._decided(operator.eq, other)
    def __ne__(self, other): return self._decided(operator.ne, other)
    def __lt__(self, other): return self._decided(operator.lt, other)
    def __le__(self, other): return self._decided(operator.le, other)
    def __gt__(self, other): return self._decided(operator.gt, other)
    def __ge__(self, other): return self._decided(operator.ge, other)
    def __round__(self, n=None): return round(self._given_away(), n)
    def __trunc__(self): return math.trunc(self._given_away())
    def __floor__(self): return math.floor(self._given_away())
    def __ceil__(self): return math.ceil(self._given_away())
    def __format__(self, spec): return format(self._given_away(), spec)
    def __str__(self): return str(self._given_away())
    def __repr__(self): return repr(self._given_away())


def _plain(value: Any) -> Any:
    return value._given_away() if type(value) is Symbol else value


class SymbolTable:
    """The symbols of one capture: leaves, the expressions built on them (each expression
    once: an optimizer computes the same bias correction for every parameter), and the leaves
    whose value Python saw."""

    def __init__(self) -> None:
        self.symbols: list[Symbol] = []
        self._interned: dict[tuple, Symbol] = {}
        self.leaves: dict[Any, Symbol] = {}
        #: What Python decided with symbols: (symbol index, test) -> (test, outcome); a test
        #: of None stands for the value itself.
        self.guards: dict[tuple, tuple] = {}

    def leaf(self, key: Any, value: Any) -> Any:
        """The symbol read from ``key`` at replay (``value`` now). Booleans stay plain."""
        if type(value) not in (int, float):
            return value
        found = self.leaves.get(key)
        if found is None:
            found = self.leaves[key] = Symbol(self, value, key=key)
        return found

    def apply(self, op: Callable, args: tuple) -> Symbol:
        signature = (op, *[(True, a.index) if type(a) is Symbol else (False, type(a), a)
                           for a in args])
        try:
            found = self._interned.get(signature)
        except TypeError:  # an unhashable plain argument
            found, signature = None, None
        if found is None:
            value = op(*[a.value if type(a) is Symbol else a for a in args])
            found = Symbol(self, value, op=op, args=args)
            if signature is not None:
                self._interned[signature] = found
        return found

    def guard(self, symbol: Symbol, test: tuple | None, outcome: Any) -> None:
        self.guards.setdefault((symbol.index, test), (symbol, test,
                                                      symbol.value if test is None else outcome))

    def failed_guard(self, values: list) -> Symbol | None:
        """The first symbol whose guard fails for ``values`` (from :meth:`evaluate`)."""
        for symbol, test, expected in self.guards.values():
            value = values[symbol.index]
            if test is None:
                if value != expected or type(value) is not type(expected):
                    return symbol
            elif test[0](value, *test[1]) != expected:
                return symbol
        return None

    def leaf_keys(self, symbol: Symbol) -> list:
        """The keys of the leaves ``symbol`` is computed from."""
        keys, pending = [], [symbol]
        while pending:
            s = pending.pop()
            if s.key is not None:
                keys.append(s.key)
            pending.extend(a for a in s.args if type(a) is Symbol)
        return keys

    def unwrap(self, values: Any) -> Any:
        """``values`` (an op's inputs or attributes) with plain numbers for symbols."""
        if type(values) is dict:
            return {k: v.value if type(v) is Symbol else v for k, v in values.items()}
        return tuple([v.value if type(v) is Symbol else v for v in values])

    def evaluate(self, leaf_values: dict) -> list:
        """Every symbol's value for new leaf values (by key), indexed by ``Symbol.index``."""
        values: list = []
        append = values.append
        for s in self.symbols:
            if s.key is not None:
                append(leaf_values[s.key])
            else:
                append(s.op(*[values[a.index] if type(a) is Symbol else a for a in s.args]))
        return values


def sqrt(x: Any) -> Any:
    """``math.sqrt``, which keeps a :class:`Symbol` an input (``math.sqrt`` takes its
    value)."""
    return x._apply(math.sqrt, x) if type(x) is Symbol else math.sqrt(x)


def has_symbols(values: Any) -> bool:
    """Whether an op's inputs (a tuple) or attributes (a dict) hold a :class:`Symbol`."""
    items = values.values() if type(values) is dict else values
    return any(type(v) is Symbol for v in items)
