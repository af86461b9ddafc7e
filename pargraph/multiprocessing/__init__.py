"""``torch.multiprocessing``: Python's ``multiprocessing``, with pargraph's shared tensors passed
between processes as shared memory, and ``spawn`` for one function over several processes.

A tensor moved to shared memory (``Tensor.share_memory_``, ``Module.share_memory``) is shared
with processes forked afterwards, and is passed by its memory file when ``multiprocessing``
pickles it (a ``spawn`` or ``forkserver`` process's arguments, a queue): the receiving process
maps the same pages, so the updates of every process reach the others (Hogwild training). Any
other tensor is pickled as its values. The one sharing strategy is ``"file_descriptor"``.

    import pargraph.multiprocessing as mp
    model.share_memory()
    workers = [mp.Process(target=train, args=(model,)) for _ in range(4)]
"""

from __future__ import annotations

import multiprocessing as _multiprocessing
import traceback
from multiprocessing import *  # noqa: F403  (Process, Queue, Pool, get_context, ...)
from multiprocessing.reduction import ForkingPickler
from typing import Any

from pargraph._tensor import Tensor
from pargraph.nn.module import Buffer, Parameter
from pargraph.shared_memory import rebuilt_buffer, reduce_shared, shared_tensors

__all__ = [*_multiprocessing.__all__, "spawn", "ProcessContext", "ProcessRaisedException",
           "ProcessExitedException", "get_sharing_strategy", "set_sharing_strategy",
           "get_all_sharing_strategies"]

_STRATEGIES = ("file_descriptor",)


def get_all_sharing_strategies() -> set[str]:
    """The ways shared tensors are passed: by their memory file's descriptor.

    Examples
    --------
    >>> import pargraph.multiprocessing as mp
    >>> mp.get_all_sharing_strategies()
    {'file_descriptor'}
    """
    return set(_STRATEGIES)


def get_sharing_strategy() -> str:
    """``"file_descriptor"``, the one strategy (PyTorch's default on Linux).

    Examples
    --------
    >>> import pargraph.multiprocessing as mp
    >>> mp.get_sharing_strategy()
    'file_descriptor'
    """
    return _STRATEGIES[0]


def set_sharing_strategy(new_strategy: str) -> None:
    """Accepts ``"file_descriptor"``; PyTorch's ``"file_system"`` is refused by name.

    Examples
    --------
    >>> import pargraph.multiprocessing as mp
    >>> mp.set_sharing_strategy("file_descriptor")
    """
    if new_strategy not in _STRATEGIES:
        raise ValueError(f"sharing strategy {new_strategy!r} is not available: pargraph passes "
                         f"shared tensors by file descriptor only ({_STRATEGIES[0]!r})")


def _rebuild(kind: type) -> Any:
    def rebuild(fd_holder: Any, shape: tuple, dtype: str, requires_grad: bool) -> Any:
        buffer = rebuilt_buffer(fd_holder, shape, dtype)
        tensor = kind(buffer.array.copy(), requires_grad) if kind is Parameter else \
            kind(buffer.array.copy())
        if kind is not Parameter and requires_grad:
            tensor.requires_grad_(True)
        shared_tensors.adopt(tensor, buffer)
        return tensor
    rebuild.__qualname__ = rebuild.__name__ = f"rebuild_shared_{kind.__name__.lower()}"
    return rebuild


rebuild_shared_tensor, rebuild_shared_parameter, rebuild_shared_buffer = (
    _rebuild(Tensor), _rebuild(Parameter), _rebuild(Buffer))


def _reducer(rebuild: Any) -> Any:
    def reduce(tensor: Any) -> tuple:
        shared = reduce_shared(tensor, rebuild)
        return shared if shared is not None else tensor.__reduce_ex__(4)
    return reduce


for _kind, _rebuilt in ((Tensor, rebuild_shared_tensor), (Parameter, rebuild_shared_parameter),
                        (Buffer, rebuild_shared_buffer)):
    ForkingPickler.register(_kind, _reducer(_rebuilt))


class ProcessRaisedException(Exception):
    """A process that :func:`spawn` started raised: its traceback is the message."""

    def __init__(self, msg: str, error_index: int, error_pid: int) -> None:
        super().__init__(msg)
        self.error_index, self.pid = error_index, error_pid


class ProcessExitedException(Exception):
    """A process that :func:`spawn` started exited with a nonzero code without raising."""

    def __init__(self, msg: str, error_index: int, error_pid: int, exit_code: int) -> None:
        super().__init__(msg)
        self.error_index, self.pid, self.exit_code = error_index, error_pid, exit_code


def _wrap(fn: Any, i: int, args: tuple, errors: Any) -> None:
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass  # the parent is stopping all of them
    except Exception:
        errors.put(traceback.format_exc())
        raise SystemExit(1) from None


class ProcessContext:
    """The processes :func:`spawn` started; :meth:`join` waits for them."""

    def __init__(self, processes: list, error_queues: list) -> None:
        self.processes, self.error_queues = processes, error_queues

    def pids(self) -> list[int]:
        return [int(p.pid) for p in self.processes]

    def join(self, timeout: float | None = None) -> bool:
        """Wait for every process; True when all ended. A process that raised (or died)
        ends the others, and its error raises here with its traceback."""
        for index, process in enumerate(self.processes):
            process.join(timeout)
            if process.exitcode not in (None, 0):
                for other in self.processes:
                    if other.is_alive():
                        other.terminate()
                queue = self.error_queues[index]
                if not queue.empty():
                    raise ProcessRaisedException(
                        f"\n\n-- Process {index} terminated with the following error:\n"
                        f"{queue.get()}", index, process.pid)
                raise ProcessExitedException(
                    f"process {index} terminated with exit code {process.exitcode}", index,
                    process.pid, process.exitcode)
        return all(p.exitcode is not None for p in self.processes)


def spawn(fn: Any, args: tuple = (), nprocs: int = 1, join: bool = True, daemon: bool = False,
          start_method: str = "spawn") -> ProcessContext | None:
    """Run ``fn(i, *args)`` for ``i`` in ``range(nprocs)``, each in a new process, as
    ``torch.multiprocessing.spawn``: with ``join``, wait for all of them (an error in one
    raises :class:`ProcessRaisedException` here with its traceback), else return their
    :class:`ProcessContext`.

    Examples
    --------
    >>> import pargraph.multiprocessing as mp
    >>> mp.spawn(print, args=("ran",), nprocs=1, start_method="fork")  # doctest: +SKIP
    0 ran
    """
    context = _multiprocessing.get_context(start_method)
    processes, queues = [], []
    for i in range(nprocs):
        errors = context.SimpleQueue()
        process = context.Process(target=_wrap, args=(fn, i, args, errors), daemon=daemon)
        process.start()
        processes.append(process)
        queues.append(errors)
    done = ProcessContext(processes, queues)
    if not join:
        return done
    while not done.join():
        pass
    return None
