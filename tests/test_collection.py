"""Tensors as dask collections: ``dask.compute``, ``dask.visualize`` and a Client's ``compute``."""

import shutil

import dask
import numpy as np
import pytest

import pargraph


def test_tensors_are_dask_collections():
    a = pargraph.ones(3) * 2
    b = a.sum()
    assert dask.is_dask_collection(a)
    ra, rb = dask.compute(a, b)
    np.testing.assert_array_equal(ra, [2.0, 2.0, 2.0])
    assert rb == 6.0
    assert dask.base.tokenize(a) != dask.base.tokenize(b)
    assert a.__dask_keys__() == [a._node.key]
    (persisted,) = dask.persist(a * 3)
    assert isinstance(persisted, pargraph.Tensor) and persisted.tolist() == [6.0, 6.0, 6.0]


@pytest.mark.skipif(shutil.which("dot") is None,
                    reason="Graphviz's dot is not installed (apt-get install graphviz)")
def test_dask_visualize_draws_the_graph(tmp_path, unfused):
    path = tmp_path / "graph.svg"
    t = (pargraph.ones(3).exp() + 1).sum()
    dask.visualize(t, filename=str(path))
    svg = path.read_text()
    assert "exp" in svg and "sum" in svg


def test_client_compute(local_client):
    t = (pargraph.arange(4.0) ** 2).sum()
    assert local_client.compute(t).result() == 14.0
