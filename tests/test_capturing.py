"""A captured step's Python numbers (``capturing.Symbol``): arithmetic on them is recorded and
evaluated again with new values as Python would compute it; any other use of one is guarded."""

import math
import operator
import random

import pytest

from pargraph.capturing import SymbolTable, active, has_symbols, sqrt

BINARY = [operator.add, operator.sub, operator.mul, operator.truediv, operator.pow]


def _expression(draw: random.Random, leaves: list, depth: int):
    """A random expression over ``leaves`` (symbols or numbers) and constants, as a function
    of the leaves, so that it can be computed on symbols and on plain numbers alike."""
    if depth == 0 or draw.random() < 0.3:
        if draw.random() < 0.7:
            k = draw.randrange(len(leaves))
            return lambda values: values[k]
        constant = draw.choice([2, 0.5, 3.0, -1])
        return lambda values: constant
    if draw.random() < 0.2:
        inner = _expression(draw, leaves, depth - 1)
        unary = draw.choice([operator.neg, abs, sqrt])
        if unary is sqrt:
            return lambda values: sqrt(abs(inner(values)))
        return lambda values: unary(inner(values))
    op = draw.choice(BINARY)
    left, right = _expression(draw, leaves, depth - 1), _expression(draw, leaves, depth - 1)
    if op is operator.pow:  # a small positive base and exponent: no complex, no overflow
        return lambda values: operator.pow(abs(left(values)) + 1, 0.5)
    if op is operator.truediv:
        return lambda values: left(values) / (abs(right(values)) + 1)
    return lambda values: op(left(values), right(values))


@pytest.mark.parametrize("seed", range(30))
def test_arithmetic_on_symbols_is_evaluated_again_as_python_computes_it(seed):
    draw = random.Random(seed)
    table = SymbolTable()
    first = [draw.uniform(0.1, 3) for _ in range(3)]
    symbols = [table.leaf(("lr", k), v) for k, v in enumerate(first)]
    expressions = [_expression(draw, symbols, 4) for _ in range(4)]
    results = [e(symbols) for e in expressions]
    for result, expression in zip(results, expressions):
        assert math.isclose(getattr(result, "value", result), expression(first))
    later = [draw.uniform(0.1, 3) for _ in range(3)]
    values = table.evaluate({("lr", k): v for k, v in enumerate(later)})
    for result, expression in zip(results, expressions):
        if type(result).__name__ == "Symbol":
            assert math.isclose(values[result.index], expression(later), rel_tol=1e-12)
    assert table.failed_guard(values) is None  # nothing was given away


def test_a_value_given_away_or_decided_is_guarded():
    table = SymbolTable()
    w, momentum = table.leaf("w", 0.5), table.leaf("momentum", 0.9)
    scaled = w * 2
    assert float(scaled) == 1.0  # Python saw the value: any other value captures again
    assert momentum > 0.5  # only the comparison's outcome is guarded
    same = table.evaluate({"w": 0.5, "momentum": 0.7})
    assert table.failed_guard(same) is None
    other_w = table.evaluate({"w": 0.25, "momentum": 0.9})
    assert table.failed_guard(other_w) is scaled
    flipped = table.evaluate({"w": 0.5, "momentum": 0.1})
    assert table.failed_guard(flipped) is momentum
    assert table.leaf_keys(scaled) == ["w"]


def test_only_numbers_become_symbols_and_an_expression_is_made_once():
    table = SymbolTable()
    assert table.leaf("flag", True) is True and table.leaf("name", "sgd") == "sgd"
    lr = table.leaf("lr", 0.1)
    assert table.leaf("lr", 0.1) is lr
    assert (1 - lr) is (1 - lr)  # an optimizer's bias correction, per parameter: once
    assert has_symbols((1.0, lr)) and has_symbols({"alpha": lr}) and not has_symbols((1.0,))
    assert table.unwrap({"alpha": lr, "beta": 2}) == {"alpha": 0.1, "beta": 2}
    assert active() is None  # no capture runs in this thread
