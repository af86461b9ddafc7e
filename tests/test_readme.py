"""Every Python block of the README runs as written, or says which block it continues.

A block that starts with ``# continues the training loop's block`` runs in what the training
loop's block left (its model, optimizer, loader). Two substitutions, each because the machine
differs, not the code: the cluster block's address is that of a real scheduler this test
starts on a free port of 127.0.0.1, and where Graphviz's ``dot`` is missing the drawing goes to
the DOT source the block's comment names (``graph.gv``).
"""

import copy
import os
import pathlib
import re
import shutil

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
CONTINUES = "# continues the training loop's block"


def _blocks() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_every_block_is_whole_or_says_what_it_continues():
    blocks = _blocks()
    assert len(blocks) >= 5
    loop = [b for b in blocks if "for images, labels in loader" in b and CONTINUES not in b]
    assert len(loop) == 1  # the one block the others continue
    for block in blocks:
        if block.startswith("#") and "continues" in block.splitlines()[0]:
            assert block.startswith(CONTINUES), block.splitlines()[0]


def test_every_block_runs(tmp_path, monkeypatch):
    pytest.importorskip("sklearn")
    import dask
    from distributed import LocalCluster

    import pargraph

    monkeypatch.chdir(tmp_path)
    blocks = _blocks()
    loop = next(b for b in blocks if "for images, labels in loader" in b
                and not b.startswith(CONTINUES))
    after_loop: dict = {}
    exec(compile(loop, "README.md (training loop)", "exec"), after_loop)
    assert len(after_loop["loader"]) > 0 and after_loop["loss"].item() > 0
    for k, block in enumerate(blocks):
        if block is loop:
            continue
        namespace = dict(after_loop) if block.startswith(CONTINUES) else {}
        if "pargraph.connect(" in block:
            with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                              protocol="tcp", host="127.0.0.1",
                              dashboard_address=None) as cluster:
                source = block.replace("tcp://127.0.0.1:8786", cluster.scheduler_address)
                # The block sets dask's config for the process, as a program does
                # (connect's scheduler and mirror_every): the test takes it all back.
                saved = copy.deepcopy(dask.config.config)
                try:
                    exec(compile(source, f"README.md (block {k + 1})", "exec"), namespace)
                    assert isinstance(namespace["model"], pargraph.nn.DataParallel)
                finally:
                    namespace["client"].close()
                    dask.config.config.clear()
                    dask.config.config.update(saved)
            continue
        if shutil.which("dot") is None:
            block = block.replace('"graph.svg"', '"graph.gv"')
        exec(compile(block, f"README.md (block {k + 1})", "exec"), namespace)
    assert os.path.exists("step.json")  # the trace block wrote its timeline
    assert os.path.exists("graph.svg") or os.path.exists("graph.gv")
