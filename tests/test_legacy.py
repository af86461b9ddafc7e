"""PyTorch's legacy tensor types: the constructor, type names and dtype checks."""


import numpy as np
import pytest

import pargraph
from pargraph.leaves import legacy_leaf, scalar


def test_legacy_constructor_and_type_names():
    assert pargraph.Tensor([-4.0]).tolist() == [-4.0]
    assert pargraph.Tensor([1, 2]).dtype == np.float32  # always float, as in PyTorch
    assert pargraph.Tensor(2, 3).shape == (2, 3) and pargraph.Tensor().shape == (0,)
    assert pargraph.ones(1).type() == "torch.FloatTensor"
    assert pargraph.ones(1).type(pargraph.float64).dtype == np.float64
    assert pargraph.ones(2).half().dtype == np.float16 and pargraph.ones(2).int().dtype == np.int32
    assert (pargraph.ones(2, dtype=pargraph.int32) + 1).dtype == np.int32
    assert pargraph.is_tensor(pargraph.ones(1)) and not pargraph.is_tensor(np.ones(1))


def test_the_legacy_constructor_and_numbers_as_attributes():
    assert legacy_leaf(2, (3,)).value.shape == (2, 3)
    assert legacy_leaf(None, ()).value.shape == (0,)
    assert legacy_leaf([1, 2], ()).value.dtype == np.float32  # Tensor(data) is float32
    with pytest.raises(TypeError, match="expected sizes"):
        legacy_leaf([1, 2], (3,))
    assert scalar(np.float32(2.5)) == 2.5 and type(scalar(np.int64(3))) is int
    assert scalar(pargraph.tensor(4.0)) == 4.0 and scalar(5) == 5
