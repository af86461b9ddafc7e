"""PyTorch's dtype objects: what they answer, what numpy takes them for, the default dtype."""

import numpy as np
import pytest

import pargraph

torch = pytest.importorskip("torch")


DTYPE_NAMES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8",
               "uint8", "bool", "complex64", "complex128"]


def test_the_default_dtype_is_settable_as_in_pytorch():
    try:
        pargraph.set_default_dtype(pargraph.float64)
        assert pargraph.tensor(1.5).dtype == pargraph.float64
        assert pargraph.zeros(2).dtype == pargraph.float64
        assert (pargraph.arange(3) * 0.5).dtype == pargraph.float64
        with pytest.raises(TypeError, match="only floating-point types"):
            pargraph.set_default_dtype(pargraph.int64)
    finally:
        pargraph.set_default_dtype(pargraph.float32)
    assert pargraph.get_default_dtype() == pargraph.float32 == pargraph.zeros(1).dtype
    assert isinstance(pargraph.zeros(1).dtype, pargraph.dtype)
    assert pargraph.tensor([300]).to(pargraph.uint8).tolist() == [44]


@pytest.mark.parametrize("name", DTYPE_NAMES)
def test_dtype_objects_answer_as_pytorchs_and_stand_for_numpys(name):
    import pickle

    ours, theirs = getattr(pargraph, name), getattr(torch, name)
    for attribute in ("is_floating_point", "is_complex", "is_signed", "itemsize"):
        assert getattr(ours, attribute) == getattr(theirs, attribute), attribute
    if theirs.is_floating_point and theirs not in (torch.float16, torch.bfloat16):
        assert str(ours.to_complex()).split(".")[-1] == str(theirs.to_complex()).split(".")[-1]
    if theirs.is_complex:
        assert str(ours.to_real()).split(".")[-1] == str(theirs.to_real()).split(".")[-1]
    assert str(ours).replace("pargraph.", "torch.") == str(theirs) == repr(theirs)
    assert isinstance(ours, pargraph.dtype)
    assert pickle.loads(pickle.dumps(ours)) is ours
    if name not in ("complex64", "complex128"):
        made = pargraph.zeros(2, dtype=ours)
        assert made.dtype is ours and str(made.dtype) == str(ours)
    as_numpy = np.dtype(ours)
    assert as_numpy == ours and ours == as_numpy and hash(ours) == hash(as_numpy)
    assert {as_numpy: 1}[ours] == 1 and np.zeros(2, ours).dtype == as_numpy
    assert ours.kind == as_numpy.kind and ours != ("int8" if name != "int8" else "int16")


def test_a_tensors_dtype_is_the_named_object():
    x = pargraph.ones(2)
    assert x.dtype is pargraph.float32 is pargraph.float and x.double().dtype is pargraph.double
    assert pargraph.tensor([1]).dtype is pargraph.long and pargraph.get_default_dtype() is \
        pargraph.float32
    assert pargraph.promote_types(pargraph.int32, pargraph.float16) is pargraph.float16
