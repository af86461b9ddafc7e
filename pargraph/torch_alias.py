"""``torch`` and its submodules imported as pargraph's, so a PyTorch program runs unchanged.

:func:`alias_torch` puts an import finder first on ``sys.meta_path``: from then on ``import
torch``, ``from torch import nn``, ``import torch.nn.functional as F`` and ``from
torch.utils.data import DataLoader`` give pargraph's modules (``torch.X`` is ``pargraph.X``),
in the program and in every library it imports afterwards. A ``torch.X`` that pargraph does
not have is an ImportError naming both modules, never a silent fall back to PyTorch (mixing
the two fails far from the import). ``python -m pargraph train.py [args]`` does this, then runs
the program as ``python train.py [args]`` would. Processes that ``multiprocessing`` starts
afterwards (``spawn``, ``forkserver``) alias torch before they import the program again, and
so does a Python process of the run that imports pargraph before torch
(``PARGRAPH_ALIAS_TORCH``).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import os
import sys
from types import ModuleType
from typing import Any

PREFIX = "torch"


class _Existing(importlib.abc.Loader):
    """Loads a module that is already imported: the pargraph module ``torch.X`` names."""

    def __init__(self, module: ModuleType) -> None:
        self.module = module

    def create_module(self, spec: Any) -> ModuleType:
        return self.module

    def exec_module(self, module: ModuleType) -> None:
        pass


class TorchFinder(importlib.abc.MetaPathFinder):
    """Finds ``torch`` and ``torch.X`` as ``pargraph`` and ``pargraph.X``."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != PREFIX and not fullname.startswith(PREFIX + "."):
            return None
        ours = "pargraph" + fullname[len(PREFIX):]
        try:
            module = importlib.import_module(ours)
        except ModuleNotFoundError as error:
            if error.name != ours:
                raise
            raise ModuleNotFoundError(
                f"No module named {fullname!r}: pargraph has no {ours!r}, and this run imports "
                f"torch as pargraph (pargraph.alias_torch, python -m pargraph)",
                name=fullname) from None
        return importlib.util.spec_from_loader(fullname, _Existing(module))


def alias_torch() -> None:
    """Make ``import torch`` (and every ``torch.*`` import) give pargraph from now on.

    Call it before anything imports torch (a notebook's first cell); a process where PyTorch
    is already imported is refused, since its tensors and pargraph's do not mix.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.alias_torch()  # doctest: +SKIP
    >>> import torch  # doctest: +SKIP
    >>> torch.nn.Linear  # doctest: +SKIP
    <class 'pargraph.nn.modules.linear.Linear'>
    """
    loaded = sys.modules.get(PREFIX)
    if loaded is not None and not loaded.__name__.startswith("pargraph"):
        raise RuntimeError("alias_torch: PyTorch is imported already (torch is in sys.modules); "
                           "call pargraph.alias_torch() before anything imports torch")
    if not any(isinstance(finder, TorchFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, TorchFinder())
    _alias_in_spawned_processes()


#: What a process ``multiprocessing`` spawns runs first: the alias, before it imports the
#: program's main module again (which imports torch).
_SPAWNED_FIRST = "import pargraph.torch_alias; pargraph.torch_alias.alias_torch(); "


#: The environment variable under which importing this module aliases torch: set for the
#: processes of this one, so that a ``forkserver`` server, which imports this module first
#: (its preload), aliases torch before it forks the program's processes.
ENVIRONMENT = "PARGRAPH_ALIAS_TORCH"


def _alias_in_spawned_processes() -> None:
    """Make the processes ``multiprocessing`` starts from now on alias torch too: with its
    ``spawn`` start method (``torch.multiprocessing.spawn``'s), their command line, which
    ``multiprocessing.spawn.get_command_line`` makes, runs :func:`alias_torch` first; with
    ``forkserver``, the server preloads this module, which aliases torch under
    :data:`ENVIRONMENT` (a server started before this call keeps what it has)."""
    from multiprocessing import forkserver, spawn

    os.environ[ENVIRONMENT] = "1"
    preload = list(getattr(forkserver._forkserver, "_preload_modules", ()))
    if __name__ not in preload:
        forkserver.set_forkserver_preload([__name__, *preload])
    made = spawn.get_command_line
    if getattr(made, "aliases_torch", False):
        return

    def get_command_line(**kwds: Any) -> list:
        line = made(**kwds)
        if "-c" in line:
            k = line.index("-c") + 1
            line[k] = _SPAWNED_FIRST + line[k]
        return line

    get_command_line.aliases_torch = True  # type: ignore[attr-defined]
    spawn.get_command_line = get_command_line


if os.environ.get(ENVIRONMENT) == "1" and PREFIX not in sys.modules:
    alias_torch()  # a forkserver's server (see ENVIRONMENT), before it forks a process
