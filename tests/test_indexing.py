"""Index keys as PyTorch reads them: values as numpy's, gradients of repeated indices summed."""

import numpy as np

import pargraph


def test_indexing_matches_numpy():
    a = np.arange(24.0).reshape(2, 3, 4)
    t = pargraph.tensor(a)
    for key in [0, -1, (1, 2), (slice(None), 1), (Ellipsis, 0), (None, 0), (0, slice(1, None, 2)),
                ([1, 0],), (slice(None), [2, 0, 2])]:
        np.testing.assert_array_equal(t[key].numpy(), a[key])
    mask = a[0, 0] > 1
    np.testing.assert_array_equal(t[:, :, pargraph.tensor(mask)].numpy(), a[:, :, mask])
    np.testing.assert_array_equal(t[t > 20].numpy(), a[a > 20])
    np.testing.assert_array_equal(t[pargraph.tensor([1, 1])].numpy(), a[[1, 1]])


def test_indexing_gradient_accumulates_repeated_indices():
    x = pargraph.zeros(3, requires_grad=True)
    x[pargraph.tensor([0, 2, 2])].sum().backward()
    assert x.grad.tolist() == [1.0, 0.0, 2.0]
