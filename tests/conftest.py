"""Shared fixtures: the schedulers every shared test runs on."""

import dask
import numpy as np
import pytest

import pargraph

SCHEDULERS = ["sync", "threads", "distributed"]


@pytest.fixture(scope="session")
def local_client():
    """An in-process distributed cluster: real scheduler and worker, threads not processes."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                      dashboard_address=None) as cluster, \
            Client(cluster, set_as_default=False) as client:
        yield client


@pytest.fixture(params=SCHEDULERS)
def scheduler(request):
    """Run the test under each of dask's schedulers; yields the scheduler's name."""
    if request.param == "distributed":
        client = request.getfixturevalue("local_client")
        with dask.config.set(scheduler=client):
            yield request.param
    else:
        with dask.config.set(scheduler=request.param):
            yield request.param


@pytest.fixture
def rng():
    pargraph.manual_seed(0)
    return np.random.default_rng(0)


@pytest.fixture
def record_runs(monkeypatch):
    """A list that receives the graph (a dict) of every dask run pargraph makes."""
    from pargraph import execution

    runs = []
    original = execution.run_graph

    def recording(graph, keys, get=None):
        runs.append(graph)
        return original(graph, keys, get)

    monkeypatch.setattr(execution, "run_graph", recording)
    return runs
