"""``torch.testing``: comparing results in tests, with PyTorch's tolerances and messages."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from pargraph._tensor import Tensor
from pargraph.ops import BFLOAT16

#: (rtol, atol) by dtype when neither is given: PyTorch's table (``torch.testing``).
TOLERANCES = {np.dtype("float16"): (1e-3, 1e-5), BFLOAT16: (1.6e-2, 1e-5),
              np.dtype("float32"): (1.3e-6, 1e-5), np.dtype("float64"): (1e-7, 1e-7),
              np.dtype("complex64"): (1.3e-6, 1e-5), np.dtype("complex128"): (1e-7, 1e-7)}


def assert_close(actual: Any, expected: Any, *, allow_subclasses: bool = True,
                 rtol: float | None = None, atol: float | None = None, equal_nan: bool = False,
                 check_device: bool = True, check_dtype: bool = True, check_layout: bool = True,
                 check_stride: bool = False, msg: str | None = None) -> None:
    """Raise ``AssertionError`` unless ``actual`` and ``expected`` (tensors, arrays, numbers,
    or sequences and mappings of them) are close: ``|actual - expected| <= atol + rtol *
    |expected|`` elementwise, with the same shapes and (``check_dtype``) dtypes. Without
    ``rtol`` and ``atol``, both come from the dtype as in PyTorch (float32: 1.3e-6, 1e-5);
    integers and booleans must be equal. ``check_device``, ``check_layout``, ``check_stride``
    and ``allow_subclasses`` are accepted for PyTorch's signature: every tensor here is a
    dense CPU one.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.testing.assert_close(pargraph.tensor([1.0, 2.0]), pargraph.tensor([1.0, 2.0]))
    >>> pargraph.testing.assert_close(pargraph.tensor([1.0]), pargraph.tensor([1.1]))
    Traceback (most recent call last):
    ...
    AssertionError: Tensor-likes are not close!
    <BLANKLINE>
    Mismatched elements: 1 / 1 (100.0%)
    Greatest absolute difference: 0.10000002384185791 at index (0,) (up to 1e-05 allowed)
    Greatest relative difference: 0.09090910851955414 at index (0,) (up to 1.3e-06 allowed)
    """
    if (rtol is None) != (atol is None):
        raise ValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, but got "
                         f"no {'rtol' if rtol is None else 'atol'}.")
    _compare(actual, expected, rtol, atol, equal_nan, check_dtype, msg, ())


def _compare(actual: Any, expected: Any, rtol: float | None, atol: float | None,
             equal_nan: bool, check_dtype: bool, msg: str | None, path: tuple) -> None:
    where = "".join(f"[{p!r}]" for p in path)
    if isinstance(expected, Mapping) and isinstance(actual, Mapping):
        if set(actual) != set(expected):
            _fail("The keys of the mappings do not match:\n"
                  f"Missing keys in the actual mapping: {sorted(set(expected) - set(actual))}\n"
                  f"Additional keys in the actual mapping: "
                  f"{sorted(set(actual) - set(expected))}", msg)
        for key in expected:
            _compare(actual[key], expected[key], rtol, atol, equal_nan, check_dtype, msg,
                     (*path, key))
        return
    if _is_sequence(expected) and _is_sequence(actual):
        if len(actual) != len(expected):
            _fail(f"The length of the sequences mismatch: {len(actual)} != {len(expected)}",
                  msg)
        for k, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, rtol, atol, equal_nan, check_dtype, msg, (*path, k))
        return
    if _kind(actual) != _kind(expected) or _kind(actual) is None:
        raise TypeError(f"No comparison pair was able to handle inputs of type "
                        f"{type(actual)} and {type(expected)}.")
    a, e = _array(actual), _array(expected)
    kind = "Tensor-likes" if a.ndim or e.ndim else "Scalars"
    suffix = f"\n\nThe failure occurred for item {where}" if where else ""
    if a.shape != e.shape:
        _fail(f"The values for attribute 'shape' do not match: {_shape(a)} != {_shape(e)}."
              + suffix, msg)
    if check_dtype and _kind(actual) != "number" and a.dtype != e.dtype:
        _fail(f"The values for attribute 'dtype' do not match: {_dtype(a)} != {_dtype(e)}."
              + suffix, msg)
    exact = rtol is None and e.dtype not in TOLERANCES and a.dtype not in TOLERANCES
    if rtol is None:
        rtol, atol = TOLERANCES.get(e.dtype, TOLERANCES.get(a.dtype, (0.0, 0.0)))
    # The differences in the inputs' common type, as PyTorch reports them (relative ones of
    # integers in the default float); closeness in double precision.
    common = np.result_type(a, e)
    floating = common.kind in "fc" or common == BFLOAT16
    wide = np.complex128 if common.kind == "c" else np.float64
    with np.errstate(all="ignore"):
        a64, e64 = a.astype(wide), e.astype(wide)
        close = np.isfinite(a64) & np.isfinite(e64) & (np.abs(a64 - e64) <=
                                                       atol + rtol * np.abs(e64))
        close |= a64 == e64  # infinities of the same sign
        if equal_nan:
            close |= np.isnan(a64) & np.isnan(e64)
        if close.all():
            return
        kept = common if floating else np.dtype(np.int64)
        difference = np.abs(a.astype(kept) - e.astype(kept))
        relative = difference.astype(common if floating else np.float32) / \
            np.abs(e.astype(common if floating else np.float32))
    wrong = int((~close).sum())
    allowed = ("", "") if exact else (f" (up to {atol} allowed)", f" (up to {rtol} allowed)")
    if not a.ndim:  # in double precision, as PyTorch compares scalars
        difference = np.abs(a64 - e64) if floating else difference
        _fail(f"{kind} are not {'equal' if exact else 'close'}!\n\n"
              f"Expected {e.item()} but got {a.item()}.\n"
              f"Absolute difference: {difference.item()}{allowed[0]}\n"
              f"Relative difference: {(np.abs(a64 - e64) / np.abs(e64)).item()}{allowed[1]}"
              + suffix, msg)
    text = (f"{kind} are not {'equal' if exact else 'close'}!\n\n"
            f"Mismatched elements: {wrong} / {a.size} ({100 * wrong / a.size:.1f}%)\n"
            f"Greatest absolute difference: {difference[_worst(difference, close)].item()} at "
            f"index {_worst(difference, close)}{allowed[0]}\n"
            f"Greatest relative difference: {relative[_worst(relative, close)].item()} at "
            f"index {_worst(relative, close)}{allowed[1]}")
    _fail(text + suffix, msg)


def _worst(difference: np.ndarray, close: np.ndarray) -> tuple:
    """The index of the greatest difference among the elements not close (NaN greatest)."""
    key = np.where(close, -np.inf, np.where(np.isnan(difference), np.inf,
                                            np.abs(difference).astype(np.float64)))
    return tuple(int(i) for i in np.unravel_index(int(np.argmax(key)), difference.shape))


def _kind(value: Any) -> str | None:
    """What PyTorch compares with what: tensors, numpy arrays, numbers, each among its own."""
    if isinstance(value, Tensor):
        return "tensor"
    if isinstance(value, np.ndarray):
        return "array"
    if isinstance(value, (bool, int, float, complex, np.generic)):
        return "number"
    return None


def _is_sequence(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def _array(value: Any) -> np.ndarray:
    if isinstance(value, Tensor):
        return np.asarray(value.detach().numpy())
    return np.asarray(value)


def _shape(array: np.ndarray) -> str:
    return f"torch.Size({list(array.shape)})"


def _dtype(array: np.ndarray) -> str:
    return f"torch.{'bfloat16' if array.dtype == BFLOAT16 else array.dtype}"


def _fail(text: str, msg: str | None) -> None:
    raise AssertionError(msg if msg is not None else text)
