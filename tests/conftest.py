"""Shared fixtures: the schedulers every shared test runs on."""

import compileall
import os
import pathlib
import sys

import dask
import numpy as np
import pytest

import pargraph

SCHEDULERS = ["sync", "threads", "distributed"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pytest_configure(config):
    """Compile the package's bytecode once, before the test processes start.

    The suite starts over a hundred interpreters that import pargraph (demos, cluster workers,
    interrupted programs). Where ``PYTHONDONTWRITEBYTECODE`` is set, as on CI machines, none of
    them writes the bytecode it compiles, so each would compile the whole package again.
    """
    if sys.dont_write_bytecode and not hasattr(config, "workerinput"):
        for room in ("pargraph", "demos", "tests"):
            compileall.compile_dir(os.path.join(ROOT, room), quiet=1)
        _rewrite_test_modules_once(config)
    if not hasattr(config, "workerinput"):
        # The suite runs three test processes and their subprocesses (demos, cluster
        # workers) on few cores. After each product numpy's OpenBLAS keeps its idle threads
        # spinning for 2^28 cycles (0.1 s) before they sleep, on cores the other processes
        # wait for. They sleep at once instead (the shortest OpenBLAS allows); the thread
        # counts, and so the numbers, are the same.
        os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
        # Every dask process the suite starts (the in-process clusters, the scheduler and
        # worker processes, the demos' clusters) samples its threads' stacks every 10 ms for
        # the dashboard's profile page, and checks its event loop every 20 ms, also while idle.
        # No test reads the profile; the event loop is checked every second instead.
        os.environ.setdefault("DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED", "False")
        os.environ.setdefault("DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL", "1s")


def _rewrite_test_modules_once(config) -> None:
    """Write pytest's assertion-rewritten bytecode of the test modules once, here.

    Each test process rewrites every test module's asserts as it imports it, and where
    bytecode is not written it cannot keep the result for the others. They read this copy
    instead. It leans on pytest's own rewriting functions: where a pytest version lacks them,
    each process rewrites for itself, as without this."""
    if config.getoption("assertmode") != "rewrite":
        return
    try:
        from _pytest.assertion import rewrite

        state = config.stash[rewrite.assertstate_key]
        for path in sorted(pathlib.Path(ROOT, "tests").glob("*.py")):
            if not (path.name.startswith("test_") or path.name == "conftest.py"):
                continue
            cache = rewrite.get_cache_dir(path)
            pyc = cache / (path.name[:-3] + rewrite.PYC_TAIL)
            if rewrite.try_makedirs(cache) and rewrite._read_pyc(path, pyc) is None:
                source_stat, code = rewrite._rewrite_test(path, config)
                rewrite._write_pyc(state, code, source_stat, pyc)
    except (ImportError, AttributeError, KeyError, TypeError):
        return


#: An in-process LocalCluster with its HTTP servers on loopback. Its scheduler and workers talk
#: in-process (no TCP host), and distributed then binds their HTTP servers (metrics, task names,
#: worker addresses) to every interface, the scheduler's on 8787 even with no dashboard. The
#: dashboard's pages are left out: starting them is a large part of the process's start.
IN_PROCESS_LOOPBACK = {"processes": False, "dashboard_address": None,
                       "scheduler_kwargs": {"dashboard_address": "127.0.0.1:0",
                                            "dashboard": False},
                       "worker_dashboard_address": "127.0.0.1:0"}


@pytest.fixture(scope="session")
def local_client():
    """An in-process distributed cluster: real scheduler and worker, threads not processes."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=2, **IN_PROCESS_LOOPBACK) as cluster, \
            Client(cluster, set_as_default=False) as client:
        yield client


#: Every graph goes through the scheduler under test: no single-task runs in the calling
#: thread, no bundling into few tasks, no adaptive choice of one thread over dask's threads.
#: (tests/test_partition.py covers those paths on their own.)
THROUGH_THE_SCHEDULER = {"pargraph.single-task-below": 0, "pargraph.task-grain": 0,
                         "pargraph.adaptive": False}


@pytest.fixture(params=SCHEDULERS)
def scheduler(request):
    """Run the test under each of dask's schedulers; yields the scheduler's name."""
    if request.param == "distributed":
        client = request.getfixturevalue("local_client")
        with dask.config.set(scheduler=client, **THROUGH_THE_SCHEDULER):
            yield request.param
    else:
        with dask.config.set(scheduler=request.param, **THROUGH_THE_SCHEDULER):
            yield request.param


@pytest.fixture(autouse=True)
def no_deferred_work_leaks_between_tests():
    """backward() defers its run to the next realization: never into another test's."""
    from pargraph.engine import execution

    yield
    execution.clear_deferred()


@pytest.fixture
def rng():
    pargraph.manual_seed(0)
    return np.random.default_rng(0)


@pytest.fixture
def record_runs(monkeypatch):
    """A list that receives the dask graph (a dict) of every run pargraph makes."""
    from pargraph.engine import execution

    runs = []
    original = execution.execute

    def recording(lowered, keys, get):
        runs.append(lowered.graph)
        return original(lowered, keys, get)

    monkeypatch.setattr(execution, "execute", recording)
    return runs


@pytest.fixture
def unfused():
    """One task per node: for tests about what individual nodes become."""
    with dask.config.set({"pargraph.fuse": False}):
        yield
