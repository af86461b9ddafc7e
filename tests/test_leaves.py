"""Data into leaf nodes (pargraph.leaves): the dtypes ``tensor(data)`` infers, the values it
copies and the errors it raises for data PyTorch refuses, each against ``torch.tensor`` on
generated nested lists, numpy arrays and numbers; and the legacy ``Tensor(...)`` forms."""

import numpy as np
import pytest

import pargraph
from pargraph.leaves import leaf_of

torch = pytest.importorskip("torch")  # the test extra installs the CPU build


def _data_cases(count=60):
    """Nested lists of Python ints, floats and bools (ragged ones among them), numpy arrays
    of several dtypes, 0-d values and empty lists; ints beyond int64 now and then."""
    rng = np.random.default_rng(0)
    for k in range(count):
        shape = tuple(int(d) for d in rng.integers(0, 4, size=k % 4))
        kind = ("int", "float", "bool", "mixed")[k % 4]
        values = rng.standard_normal(shape) * 1e3
        if kind == "int":
            data = values.astype(np.int64).tolist()
        elif kind == "float":
            data = values.tolist()
        elif kind == "bool":
            data = (values > 0).tolist()
        else:
            flat = [int(v) if i % 2 else float(v) for i, v in enumerate(values.ravel())]
            data = np.array(flat, dtype=object).reshape(shape).tolist() if flat else []
        if k % 7 == 6 and isinstance(data, list) and data:
            data = [data[0], *data[1:], [1] * (1 + len(data))]  # ragged
        if k % 11 == 10:
            data = [2 ** 63 + k]  # beyond int64
        yield data
    for dtype in (np.float16, np.float32, np.float64, np.int8, np.int32, np.uint8, np.bool_):
        yield (rng.standard_normal((2, 3)) * 10).astype(dtype)


def _torch_outcome(data):
    try:
        return torch.tensor(data), None
    except (TypeError, ValueError, RuntimeError, OverflowError) as error:
        return None, error


@pytest.mark.parametrize("data", list(_data_cases()), ids=lambda d: type(d).__name__)
def test_tensor_of_data_infers_pytorchs_dtype_and_values_or_refuses_as_it_does(data):
    theirs, refused = _torch_outcome(data)
    if refused is not None:
        with pytest.raises((TypeError, ValueError, RuntimeError, OverflowError)):
            pargraph.tensor(data)
        return
    ours = pargraph.tensor(data)
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_a_leaf_copies_its_data_and_a_tensors_values():
    array = np.arange(3.0)
    node = leaf_of(array)
    array[0] = 7.0
    assert node.value.tolist() == [0.0, 1.0, 2.0]
    t = pargraph.tensor([1.0, 2.0], requires_grad=True)
    copied = leaf_of(t * 2)
    assert copied.value.tolist() == [2.0, 4.0] and not copied.history
