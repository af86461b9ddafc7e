"""``python -m pargraph program.py`` and ``pargraph.alias_torch()``: PyTorch programs run with
their imports untouched (``import torch``, ``from torch import nn``, ``import
torch.nn.functional as F``, ``from torch.utils.data import DataLoader``), on pargraph even
where PyTorch is installed, and a ``torch.X`` pargraph lacks is an error naming it."""

import pathlib
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

#: A training script as PyTorch users write it: every import from torch, argparse, a
#: DataLoader, a module, an optimizer, a helper module of its own beside it.
PROGRAM = """
import argparse

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn, optim
from torch.utils.data import DataLoader, TensorDataset

from helpers import make_model

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
args = parser.parse_args()

torch.manual_seed(0)
rng = np.random.default_rng(0)
x = torch.tensor(rng.standard_normal((256, 8)).astype(np.float32))
y = (x[:, 0] > 0).long()
loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
model = make_model()
opt = optim.SGD(model.parameters(), lr=0.5)
losses = []
for epoch in range(args.epochs):
    total = 0.0
    for xb, yb in loader:
        opt.zero_grad()
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        total += loss.item()
    losses.append(total / len(loader))
print("losses", " ".join(f"{v:.4f}" for v in losses))
print("tensor type", type(x).__module__, "linear", nn.Linear.__module__)
"""

HELPERS = """
from torch import nn


def make_model():
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
"""


def _run(args, cwd, **kwargs):
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                          **kwargs)


@pytest.fixture
def program(tmp_path):
    (tmp_path / "train.py").write_text(PROGRAM)
    (tmp_path / "helpers.py").write_text(HELPERS)
    return tmp_path


def test_a_pytorch_program_runs_unchanged_on_pargraph_and_learns(program):
    done = _run(["-m", "pargraph", "train.py", "--epochs", "3"], program)
    assert done.returncode == 0, done.stderr
    assert "running train.py with every torch import resolving to pargraph" in done.stderr
    lines = dict(line.split(" ", 1) for line in done.stdout.strip().splitlines())
    losses = [float(v) for v in lines["losses"].split()]
    assert len(losses) == 3 and losses[-1] < 0.7 * losses[0]  # it trained
    assert lines["tensor"] == "type pargraph._tensor linear pargraph.nn.modules.linear"


def test_the_same_program_on_pytorch_itself_for_comparison(program):
    pytest.importorskip("torch")  # the test extra installs it
    done = _run(["train.py", "--epochs", "3"], program)
    assert done.returncode == 0, done.stderr
    assert "type torch linear torch.nn.modules.linear" in done.stdout


def test_a_module_runs_with_dash_m_and_sees_its_arguments(program):
    (program / "tool.py").write_text("import sys, torch\nprint(torch.__name__, sys.argv[1:])\n")
    done = _run(["-m", "pargraph", "-m", "tool", "a", "--b"], program)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "pargraph ['a', '--b']"


#: How programs test the PyTorch they run on, each expected True on a PyTorch 2 API.
VERSION_CHECKS = (
    "torch.__version__ >= (2, 0)", "torch.__version__ >= '1.9'", "torch.__version__ < '3'",
    "version.parse(torch.__version__) >= version.parse('2.0')",
    "int(torch.__version__.split('.')[0]) >= 2",
    "tuple(map(int, torch.__version__.split('+')[0].split('.')[:2])) >= (1, 8)",
    "torch.version.__version__ == torch.__version__", "torch.version.cuda is None",
    "not torch.cuda.is_available()",
)


def test_programs_that_check_the_torch_version_take_their_pytorch_2_paths(program):
    """``torch.__version__`` names the PyTorch API pargraph follows (the one its tests
    compare against, with pargraph's release as its local label, as PyTorch's is ``+cpu``) and
    compares as PyTorch's does: with strings, tuples and ``packaging`` versions."""
    torch = pytest.importorskip("torch")  # the test extra installs the CPU build
    import importlib.metadata

    (program / "checks.py").write_text(
        "import torch\nfrom packaging import version\n"
        + "".join(f"print({check})\n" for check in VERSION_CHECKS)
        + "print(torch.__version__)\n")
    done = _run(["-m", "pargraph", "checks.py"], program)
    assert done.returncode == 0, done.stderr
    *results, shown = done.stdout.split()
    assert results == ["True"] * len(VERSION_CHECKS)
    release, label = shown.split("+")
    assert release == torch.__version__.split("+")[0]  # the PyTorch the suite compares with
    assert label == f"pargraph.{importlib.metadata.version('pargraph')}"
    assert f"pargraph {importlib.metadata.version('pargraph')}: running" in done.stderr


def test_a_torch_module_pargraph_lacks_is_an_error_naming_both(program):
    (program / "uses_missing.py").write_text("import torch.cuda.nccl as nccl\n")
    done = _run(["-m", "pargraph", "uses_missing.py"], program)
    assert done.returncode == 1
    assert "No module named 'torch.cuda.nccl': pargraph has no " \
           "'pargraph.cuda.nccl'" in done.stderr
    (program / "uses_name.py").write_text("from torch.nn import NoSuchLayer\n")
    done = _run(["-m", "pargraph", "uses_name.py"], program)
    assert "cannot import name 'NoSuchLayer' from 'pargraph.nn'" in done.stderr


def test_alias_torch_in_a_notebook_and_its_refusal_after_pytorch(program):
    code = textwrap.dedent("""
        import pargraph
        pargraph.alias_torch(); pargraph.alias_torch()  # twice: one finder
        import sys, torch, torch.nn.functional as F
        from torch.optim.lr_scheduler import StepLR
        print(torch is pargraph, F is pargraph.nn.functional, StepLR.__module__,
              sum(type(f).__name__ == "TorchFinder" for f in sys.meta_path))
    """)
    done = _run(["-c", code], program)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "pargraph.optim.lr_scheduler", "1"]
    pytest.importorskip("torch")
    done = _run(["-c", "import torch, pargraph; pargraph.alias_torch()"], program)
    assert done.returncode == 1 and "PyTorch is imported already" in done.stderr


def test_usage(program):
    done = _run(["-m", "pargraph"], program)
    assert done.returncode == 2 and "usage: python -m pargraph SCRIPT" in done.stderr
    done = _run(["-m", "pargraph", "--help"], program)
    assert done.returncode == 0 and "usage" in done.stdout
