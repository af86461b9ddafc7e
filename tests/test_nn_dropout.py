"""Channel dropouts (``nn.functional.dropout1d/2d/3d`` and their modules) on inputs of every
number of dimensions, as PyTorch 2.13 treats them: which dimensions a mask spans, its warnings
and its errors, compared with torch's on the same shapes."""

import warnings

import numpy as np
import pytest

import pargraph
from pargraph.nn import functional as F

torch = pytest.importorskip("torch")

SHAPES = [(), (50,), (40, 60), (20, 30, 40), (20, 30, 4, 5), (20, 30, 4, 5, 6),
          (10, 12, 2, 2, 3, 3)]


def _spans(values: np.ndarray) -> tuple:
    """For each dimension, whether the dropped elements are the same all along it."""
    dropped = values == 0
    return tuple(bool((dropped == dropped.take([0], axis=d)).all()) for d in range(values.ndim))


def _dropout(lib, op, shape):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = getattr(lib.nn.functional, op)(lib.ones(shape), 0.5, training=True)
        except RuntimeError as error:
            return "error", str(error)
    return _spans(out.numpy()), [str(w.message) for w in caught]


@pytest.mark.parametrize("op", ["dropout1d", "dropout2d", "dropout3d"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_a_channel_dropout_masks_warns_and_refuses_as_pytorchs(op, shape):
    pargraph.manual_seed(0)
    torch.manual_seed(0)
    assert _dropout(pargraph, op, shape) == _dropout(torch, op, shape)


def test_channel_dropout_scales_the_kept_channels_and_its_module_follows():
    pargraph.manual_seed(1)
    x = pargraph.ones(8, 16, 3, 3)
    out = F.dropout2d(x, p=0.25).numpy()
    assert set(np.unique(out)) <= {0.0, np.float32(1 / 0.75)} and (out == 0).any()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        layer = pargraph.nn.Dropout2d(0.5)
        rows = layer(pargraph.ones(40, 60)).numpy()  # a 2-D input: elements, with a warning
    assert "Received a 2-D input to dropout2d" in str(caught[0].message)
    assert not _spans(rows)[0] and not _spans(rows)[1]
    assert F.dropout2d(x, p=0.5, training=False) is x
