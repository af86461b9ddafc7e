"""``pargraph.testing.assert_close`` against PyTorch's: the same verdicts and messages."""

import numpy as np
import pytest
import torch

import pargraph

CASES = [
    ([1.0, 2.0], [1.0, 2.0], {}),
    ([1.0], [1.1], {}),
    ([1.0, 2.0, 3.0], [1.0, 2.5, 3.000001], {}),
    ([[1.0, 2.0], [3.0, 4.0]], [[1.0, 2.0], [3.0, 4.5]], {}),
    (1.0, 1.5, {}),
    ([1, 2], [1, 3], {}),
    (3, 3, {}),
    ([1.0], [1.001], {"rtol": 1e-2, "atol": 0.0}),
    ([1.0], [1.001], {"rtol": 1e-4, "atol": 0.0}),
    ([float("nan")], [float("nan")], {}),
    ([float("nan")], [float("nan")], {"equal_nan": True}),
    ([float("inf"), 1.0], [float("inf"), 1.0], {}),
    ([float("inf")], [float("-inf")], {}),
    ([1.0, 2.0], [1.0, 2.0, 3.0], {}),
    ([1.0], [1.5], {"msg": "my message"}),
]


def _both(value, module, dtype=None):
    return module.tensor(value, dtype=dtype) if dtype is not None else module.tensor(value)


def _outcome(check, *args, **kwargs):
    try:
        check(*args, **kwargs)
    except (AssertionError, TypeError, ValueError) as error:
        return type(error).__name__, str(error).replace("pargraph._tensor.Tensor",
                                                        "torch.Tensor")
    return None


@pytest.mark.parametrize("actual, expected, options", CASES)
@pytest.mark.parametrize("dtype", [None, "float64", "float16"])
def test_assert_close_says_what_pytorchs_says(actual, expected, options, dtype):
    floats = all(isinstance(v, float) for v in np.ravel(actual).tolist() +
                 np.ravel(expected).tolist())
    if dtype is not None and not floats:
        dtype = None
    mine = _outcome(pargraph.testing.assert_close,
                    _both(actual, pargraph, getattr(pargraph, dtype) if dtype else None),
                    _both(expected, pargraph, getattr(pargraph, dtype) if dtype else None),
                    **options)
    theirs = _outcome(torch.testing.assert_close,
                      _both(actual, torch, getattr(torch, dtype) if dtype else None),
                      _both(expected, torch, getattr(torch, dtype) if dtype else None),
                      **options)
    assert mine == theirs


@pytest.mark.parametrize("actual, expected", [
    (1.0, 1.5), (2, 2), (np.ones(2), np.ones(2)), (np.ones(2), np.zeros(2)),
    ({"a": [1.0, 2.0]}, {"a": [1.0, 2.5]}), ({"a": 1.0}, {"b": 1.0}), ([1.0, 2.0], [1.0]),
])
def test_numbers_arrays_sequences_and_mappings_as_pytorch(actual, expected):
    assert _outcome(pargraph.testing.assert_close, actual, expected) == \
        _outcome(torch.testing.assert_close, actual, expected)


def test_a_tensor_against_a_list_or_an_array_is_a_type_error_and_dtypes_must_match():
    for other in ([1.0, 2.0], np.ones(2, dtype=np.float32), 1.0):
        assert _outcome(pargraph.testing.assert_close, pargraph.ones(2), other) == \
            _outcome(torch.testing.assert_close, torch.ones(2), other)
    assert _outcome(pargraph.testing.assert_close, pargraph.ones(2),
                    pargraph.ones(2, dtype=pargraph.float64)) == \
        _outcome(torch.testing.assert_close, torch.ones(2), torch.ones(2, dtype=torch.float64))
    pargraph.testing.assert_close(pargraph.ones(2), pargraph.ones(2, dtype=pargraph.float64),
                                  check_dtype=False)
    with pytest.raises(ValueError, match="rtol"):
        pargraph.testing.assert_close(pargraph.ones(1), pargraph.ones(1), atol=1e-3)
