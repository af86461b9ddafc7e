"""``finfo`` and ``iinfo``: a dtype's numbers, as PyTorch gives them."""

import pytest

import pargraph

torch = pytest.importorskip("torch")


def test_finfo_gives_pytorchs_python_numbers():
    for dtype in ("float32", "float64", "float16", "bfloat16"):
        ours, theirs = pargraph.finfo(getattr(pargraph, dtype)), torch.finfo(getattr(torch, dtype))
        assert repr(ours) == repr(theirs)
        for name in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"):
            assert getattr(ours, name) == getattr(theirs, name)
            assert type(getattr(ours, name)) is type(getattr(theirs, name))
        assert ours.dtype == theirs.dtype
