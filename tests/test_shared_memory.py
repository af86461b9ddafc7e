"""Tensors in shared memory (``share_memory_()``): values kept, parameters and buffers marked,
and a failed run leaving the tensor reading its mapping."""

import numpy as np
import pytest

import pargraph
from pargraph.shared_memory import shared_tensors


def test_sharing_keeps_the_values_and_marks_parameters_and_buffers():
    pargraph.manual_seed(0)
    model = pargraph.nn.Sequential(pargraph.nn.Linear(3, 2), pargraph.nn.BatchNorm1d(2))
    before = {name: t.detach().numpy().copy() for name, t in model.state_dict().items()}
    assert model.share_memory() is model
    for name, tensor in model.state_dict().items():
        assert tensor.is_shared(), name
        np.testing.assert_array_equal(tensor.detach().numpy(), before[name])
    assert model[0].weight.requires_grad and model[0].weight.is_leaf
    assert not pargraph.ones(2).is_shared()
    with pytest.raises(RuntimeError, match="without autograd history"):
        (model[0].weight * 2).share_memory_()


def test_a_failed_run_leaves_a_shared_tensor_reading_its_mapping():
    """A run reads a copy of each shared tensor; when it fails, the tensor reads the memory
    file again, so another process's later writes are seen without a successful run."""
    p = pargraph.zeros(3).share_memory_()
    bad = (p * float("nan")).multinomial(1, replacement=True)
    with pytest.raises(RuntimeError, match="`inf`, `nan` or element < 0"):
        bad.tolist()
    shared_tensors.buffer_of(p).array[:] = 5.0  # what another process writes
    np.testing.assert_array_equal(p.numpy(), [5.0, 5.0, 5.0])
