"""What a compiled step's tasks run on a cluster: the program held in a worker's memory
between steps, run whole on one worker process, or a group of it per task on several."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from pargraph.engine.threads import run_on_threads
from pargraph.runtime import LIT, FusedTask, straight_line


class HeldProgram:
    """A compiled step's group tasks, held in a cluster worker's memory between steps.

    It travels to each worker once (:mod:`pargraph.remote.programs`); each step sends the
    call's numbers, which ``literals`` ``(group, member, position, symbol)`` and
    ``attributes`` ``(group, member, name, symbol)`` say where to write, and the worker runs
    a group as straight-line code made at its first run there. On one worker process the
    program runs whole, as one task (:func:`run_held`), on the worker's threads as
    :func:`threads.run_on_threads` runs it locally: a scheduler round trip saved between
    dependent groups. On several, each group is a task (:func:`run_held_group`) on the
    worker the placement chose. Called, it takes the program's slots and returns the values
    of its outputs (``unpack``), in order; ``recipes[g]``: group ``g``'s arguments, each
    ``(True, group)`` (its tuple) or ``(False, slot)``, as :attr:`Program.recipes`."""

    __slots__ = ("tasks", "recipes", "unpack", "threads", "literals", "attributes", "seen",
                 "lock")

    def __init__(self, tasks: list[FusedTask], recipes: list, unpack: list,
                 threads: int, literals: list = (), attributes: list = ()) -> None:
        self.tasks, self.recipes, self.unpack, self.threads = tasks, recipes, unpack, threads
        self.literals, self.attributes = list(literals), list(attributes)
        self.seen: list | None = None
        # a step's group tasks on one worker bind and generate on its threads at once
        self.lock = threading.Lock()

    def __getstate__(self) -> tuple:
        return (self.tasks, self.recipes, self.unpack, self.threads, self.literals,
                self.attributes)

    def __setstate__(self, state: tuple) -> None:
        self.__init__(*state)

    def __call__(self, *slots: Any) -> tuple:
        graph = {g: WholeGroup(self, g, slots) for g in range(len(self.tasks))}
        wanted = sorted({g for g, _ in self.unpack})
        done = dict(zip(wanted, run_on_threads(graph, wanted, self.threads)))
        return tuple(done[g][e] for g, e in self.unpack)

    def ready(self, symbols: list | None, groups: Iterable[int]) -> None:
        """Write this call's numbers into the members' literals and attributes, and make the
        straight-line code of ``groups`` where it is missing (reading literals and
        attributes at each run)."""
        with self.lock:
            if symbols is not None and symbols != self.seen:
                for g, j, position, symbol in self.literals:
                    self.tasks[g].sources[j][position] = (LIT, symbols[symbol])
                for g, j, name, symbol in self.attributes:
                    member = self.tasks[g].nodes[j]
                    member.attrs = {**member.attrs, name: symbols[symbol]}
                self.seen = symbols
            for g in groups:
                if self.tasks[g].straight is None:
                    self.tasks[g].straight = straight_line(self.tasks[g], per_run=True)

    def __repr__(self) -> str:
        return f"HeldProgram({len(self.tasks)} groups)"


def run_held(program: HeldProgram, symbols: list | None, *slots: Any) -> tuple:
    """A step of a :class:`HeldProgram` held in this worker's memory, whole: its numbers
    bound, its groups run on the step's slots."""
    program.ready(symbols, range(len(program.tasks)))
    return program(*slots)


def run_held_group(program: HeldProgram, symbols: list | None, group: int,
                   *external: Any) -> Any:
    """Group ``group`` of a :class:`HeldProgram` held in this worker's memory, on its
    arguments ``external``: the step's numbers bound first."""
    program.ready(symbols, (group,))
    return program.tasks[group](*external)


class WholeGroup:
    """One group of a :class:`HeldProgram`, as :func:`threads.run_on_threads` runs it."""

    __slots__ = ("program", "group", "slots", "dependencies")

    def __init__(self, program: HeldProgram, group: int, slots: tuple) -> None:
        self.program, self.group, self.slots = program, group, slots
        self.dependencies = [v for is_group, v in program.recipes[group] if is_group]

    def __call__(self, done: dict) -> Any:
        slots = self.slots
        return self.program.tasks[self.group](*[done[v] if is_group else slots[v]
                                                for is_group, v in
                                                self.program.recipes[self.group]])
