"""How PyTorch reads arguments (``pargraph.spellings``): the deprecated overloads that put a
scale first, as PyTorch still takes them (values and warning), in method, in-place and
function forms. numpy's spellings and 0-d dims are in the op database (tests/op_db.py)."""

import warnings

import numpy as np
import pytest

import pargraph

torch = pytest.importorskip("torch")

#: (method, how many tensors follow the scale)
SCALE_FIRST = [("add", 1), ("add_", 1), ("sub", 1), ("sub_", 1), ("addcmul", 2),
               ("addcmul_", 2), ("addcdiv", 2), ("addcdiv_", 2)]


def _call(lib, name, form, scale, values):
    x, *tensors = (lib.tensor(v) for v in values)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if form == "function":
            result = getattr(lib, name)(x, scale, *tensors)
        else:
            result = getattr(x, name)(scale, *tensors)
    return result.numpy(), [str(w.message).splitlines()[0] for w in caught
                            if issubclass(w.category, UserWarning)]


@pytest.mark.parametrize("name,count", SCALE_FIRST)
def test_a_scale_first_is_the_deprecated_overload_with_its_warning(name, count):
    rng = np.random.default_rng(len(name))
    forms = ["method"] + (["function"] if not name.endswith("_") else [])
    for form in forms:
        for scale in (-0.5, 3, 0.0):
            values = [rng.uniform(1, 2, (2, 3)) for _ in range(count + 1)]
            ours, our_warnings = _call(pargraph, name, form, scale, values)
            theirs, their_warnings = _call(torch, name, form, scale, values)
            np.testing.assert_allclose(ours, theirs, rtol=1e-12)
            assert our_warnings == [f"This overload of {name} is deprecated:"]
            # PyTorch warns once per process and signature, with the same first line.
            assert all(w == our_warnings[0] for w in their_warnings)


def test_the_modern_forms_do_not_warn_and_a_bool_scale_is_checked_as_pytorchs():
    x, g = pargraph.ones(2), pargraph.full((2,), 2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert x.add(g, alpha=-0.5).tolist() == [0.0, 0.0]
        assert x.addcmul(g, g, value=0.5).tolist() == [3.0, 3.0]
        assert x.add(2).tolist() == [3.0, 3.0]
    for lib in (torch, pargraph):  # a bool is a Number there, refused for a float result
        with pytest.raises(RuntimeError, match="Boolean alpha only supported for Boolean"):
            lib.ones(2).add(True, lib.ones(2))
        with pytest.raises(RuntimeError, match="argument alpha must not be a floating point"):
            lib.ones(2, dtype=lib.int64).add(lib.ones(2, dtype=lib.int64), alpha=2.0)
        flags = lib.tensor([True, False])
        assert flags.add(flags, alpha=2).tolist() == [True, False]  # bool stays bool
