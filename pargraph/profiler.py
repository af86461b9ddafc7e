"""``pargraph.profiler``: PyTorch's profiler API over :func:`pargraph.trace`.

``with profile() as prof:`` records every node that runs in the block (a trace), and
``prof.key_averages().table(sort_by="cpu_time_total")`` totals them by task name (``linear``,
``linear_backward``, ``sgd_update``: the names the dashboard shows), as PyTorch's table totals
its operators. ``record_function("name")`` adds the wall time of a block as a row of its own.
``schedule`` and ``on_trace_ready`` work as PyTorch's: ``prof.step()`` ends a step, only the
steps a schedule records are counted, and the handler runs at the end of each active cycle.
"""

from __future__ import annotations

import enum
import functools
import os
import socket
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pargraph.context import context
from pargraph.trace import Trace, trace

__all__ = ["profile", "record_function", "ProfilerActivity", "ProfilerAction", "schedule",
           "tensorboard_trace_handler"]


class ProfilerActivity(enum.Enum):
    """What a profile records: the CPU (every pargraph node runs on it)."""

    CPU = "CPU"
    CUDA = "CUDA"
    XPU = "XPU"
    MTIA = "MTIA"


class ProfilerAction(enum.Enum):
    """What a schedule asks of a step."""

    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0,
             skip_first: int = 0) -> Callable[[int], ProfilerAction]:
    """PyTorch's profiler schedule: skip ``skip_first`` steps, then cycles of ``wait`` steps
    not recorded, ``warmup`` not counted, ``active`` recorded (the last one saved), ``repeat``
    cycles (0: for ever).

    Examples
    --------
    >>> from pargraph.profiler import schedule
    >>> [schedule(wait=1, warmup=1, active=2)(step).name for step in range(4)]
    ['NONE', 'WARMUP', 'RECORD', 'RECORD_AND_SAVE']
    """
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise ValueError("Invalid profiler schedule arguments")
    if warmup == 0:
        warnings.warn("Profiler won't be using warmup, this can skew profiler results",
                      stacklevel=2)

    def action(step: int) -> ProfilerAction:
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        cycle = wait + warmup + active
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        in_cycle = step % cycle
        if in_cycle < wait:
            return ProfilerAction.NONE
        if in_cycle < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if in_cycle < cycle - 1 else \
            ProfilerAction.RECORD_AND_SAVE

    return action


@dataclass
class FunctionEventAvg:
    """One row of ``key_averages()``: a task name's calls and times (microseconds)."""

    key: str
    count: int = 0
    cpu_time_total: float = 0.0
    self_cpu_time_total: float = 0.0

    @property
    def cpu_time(self) -> float:
        """The average time of a call."""
        return self.cpu_time_total / self.count if self.count else 0.0


_SORT_KEYS = {"cpu_time_total", "self_cpu_time_total", "cpu_time", "count"}


class EventList(list):
    """The rows of ``key_averages()``; ``table()`` prints them as PyTorch's does."""

    def table(self, sort_by: str | None = None, row_limit: int = 100, max_name_column_width:
              int = 55, header: str | None = None, top_level_events_only: bool = False) -> str:
        """The rows as a text table, sorted by ``sort_by`` (largest first), at most
        ``row_limit`` of them (-1: all)."""
        rows = list(self)
        if sort_by is not None:
            if sort_by not in _SORT_KEYS:
                raise AttributeError(f"'FunctionEventAvg' object has no attribute '{sort_by}' "
                                     f"(pargraph's rows sort by {sorted(_SORT_KEYS)})")
            rows.sort(key=lambda row: getattr(row, sort_by), reverse=True)
        if row_limit is not None and row_limit >= 0:
            rows = rows[:row_limit]
        total = sum(row.self_cpu_time_total for row in self) or 1.0
        width = max([len("Name")] + [min(len(r.key), max_name_column_width) for r in rows])
        names = ("Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg",
                 "# of Calls")
        rule = "  ".join(["-" * width] + ["-" * 12] * 6)
        lines = ([header] if header else []) + [
            rule, "  ".join([names[0].rjust(width)] + [n.rjust(12) for n in names[1:]]), rule]
        for r in rows:
            lines.append("  ".join([r.key[:width].rjust(width)] + [c.rjust(12) for c in (
                f"{100 * r.self_cpu_time_total / total:.2f}%", _time(r.self_cpu_time_total),
                f"{100 * r.cpu_time_total / total:.2f}%", _time(r.cpu_time_total),
                _time(r.cpu_time), str(r.count))]))
        lines += [rule, f"Self CPU time total: {_time(sum(r.self_cpu_time_total for r in self))}"]
        return "\n".join(lines) + "\n"

    def __str__(self) -> str:
        return self.table()


def _time(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


class _Active:
    """The profiles in progress (``record_function`` reports its blocks to each)."""

    def __init__(self) -> None:
        self.profiles: list[profile] = []
        self.lock = threading.Lock()


_active = context.register("profiler", _Active())


class profile:  # noqa: N801  (PyTorch's name)
    """Record every node that runs inside the block, as ``torch.profiler.profile``: rows by
    task name (``key_averages()``), a Chrome trace (``export_chrome_trace``). ``activities``
    other than the CPU warn and record nothing more (no GPU here); ``record_shapes``,
    ``profile_memory``, ``with_stack``, ``with_flops`` and ``with_modules`` are accepted and
    change nothing.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.profiler import profile
    >>> with profile() as prof:
    ...     _ = (pargraph.ones(3).exp() * 2).sum().item()
    >>> sorted(row.key for row in prof.key_averages())
    ['exp', 'mul', 'sum']
    """

    def __init__(self, *, activities: Any = None, schedule: Callable | None = None,
                 on_trace_ready: Callable | None = None, record_shapes: bool = False,
                 profile_memory: bool = False, with_stack: bool = False,
                 with_flops: bool = False, with_modules: bool = False, **_: Any) -> None:
        activities = set(activities or [ProfilerActivity.CPU])
        if activities - {ProfilerActivity.CPU}:
            warnings.warn("pargraph runs on the CPU only: profiling the CPU", stacklevel=2)
        self.schedule, self.on_trace_ready = schedule, on_trace_ready
        self.step_num = 0
        self._trace: Any = None
        self._context: Any = None
        self._windows: list[tuple[float, float]] = []  # recorded steps' times
        self._step_start = 0.0
        self._blocks: list[tuple[str, float, float]] = []  # record_function's

    def __enter__(self) -> profile:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> None:
        """Begin recording (what entering the ``with`` block does)."""
        self._context = trace()
        self._trace = self._context.__enter__()
        self._step_start = time.time()
        with _active.lock:
            _active.profiles.append(self)

    def stop(self) -> None:
        """End recording; without a schedule, ``on_trace_ready`` runs now."""
        with _active.lock:
            if self in _active.profiles:
                _active.profiles.remove(self)
        if self._context is not None:
            self._context.__exit__(None, None, None)
            self._context = None
        if self.schedule is None:
            self._windows = [(float("-inf"), float("inf"))]
            if self.on_trace_ready is not None:
                self.on_trace_ready(self)

    def step(self) -> None:
        """End a step: with a schedule, keep its records if the schedule records it, and run
        ``on_trace_ready`` when it ends an active cycle."""
        now = time.time()
        if self.schedule is not None:
            action = self.schedule(self.step_num)
            if action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
                from pargraph.engine import execution

                execution.flush()  # the step's deferred work runs inside its window
                now = time.time()
                self._windows.append((self._step_start, now))
            if action == ProfilerAction.RECORD_AND_SAVE:
                if self.on_trace_ready is not None:
                    self.on_trace_ready(self)
                self._windows = []
        self.step_num += 1
        self._step_start = now

    def _counted(self, start: float) -> bool:
        return any(a <= start <= b for a, b in self._windows) if self.schedule is not None \
            else True

    def key_averages(self, group_by_input_shape: bool = False,
                     group_by_stack_n: int = 0) -> EventList:
        """Per task name (and per ``record_function`` block name): calls and times."""
        rows: dict[str, FunctionEventAvg] = {}
        for record in self._trace.nodes() if self._trace is not None else []:
            if not self._counted(record.start):
                continue
            row = rows.setdefault(record.key.rsplit("-", 2)[0],
                                  FunctionEventAvg(record.key.rsplit("-", 2)[0]))
            row.count += 1
            row.cpu_time_total += record.duration * 1e6
            row.self_cpu_time_total += record.duration * 1e6
        for name, start, stop in self._blocks:
            if self._counted(start):
                row = rows.setdefault(name, FunctionEventAvg(name))
                row.count += 1
                row.cpu_time_total += (stop - start) * 1e6  # a block's own time is its ops'
        return EventList(rows.values())

    def events(self) -> list:
        """The recorded nodes (``pargraph.trace``'s records), by start time."""
        return [r for r in self._trace.nodes() if self._counted(r.start)]

    def export_chrome_trace(self, path: str | os.PathLike) -> None:
        """Write the counted nodes in the Chrome trace event format (Perfetto)."""
        counted = Trace()
        counted.records = {key: r for key, r in self._trace.records.items()
                           if r.stop and self._counted(r.start)}
        counted.to_chrome(path)


class record_function:  # noqa: N801  (PyTorch's name)
    """A labelled block (or decorated function): its wall time becomes a row of every
    profile in progress, as in PyTorch.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.profiler import profile, record_function
    >>> with profile() as prof:
    ...     with record_function("loss"):
    ...         _ = pargraph.ones(2).sum().item()
    >>> "loss" in [row.key for row in prof.key_averages()]
    True
    """

    def __init__(self, name: str, args: str | None = None) -> None:
        self.name = name
        self._started: list[float] = []

    def __enter__(self) -> record_function:
        self._started.append(time.time())
        return self

    def __exit__(self, *exc: Any) -> None:
        start, stop = self._started.pop(), time.time()
        with _active.lock:
            for active in _active.profiles:
                active._blocks.append((self.name, start, stop))

    def __call__(self, function: Callable) -> Callable:
        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with record_function(self.name):
                return function(*args, **kwargs)
        return wrapper


def tensorboard_trace_handler(dir_name: str, worker_name: str | None = None,
                              use_gzip: bool = False) -> Callable[[profile], None]:
    """An ``on_trace_ready`` handler writing each saved cycle's Chrome trace into
    ``dir_name`` as ``<worker>.<time>.pt.trace.json``, as PyTorch's.

    Examples
    --------
    >>> from pargraph.profiler import tensorboard_trace_handler
    >>> callable(tensorboard_trace_handler("runs"))
    True
    """
    def handler(prof: profile) -> None:
        os.makedirs(dir_name, exist_ok=True)
        name = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        prof.export_chrome_trace(os.path.join(dir_name,
                                              f"{name}.{time.time_ns()}.pt.trace.json"))
    return handler
